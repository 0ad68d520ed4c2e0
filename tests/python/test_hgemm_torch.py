"""torch.ops.kforge.hgemm, the PyTorch op of `kforge hgemm export --torch`.

    python3 tests/python/test_hgemm_torch.py cpu|gpu EXPORT_DIR

EXPORT_DIR is an export written with --torch; its load() builds the library and the op there (or
reuses an earlier build). `cpu`: the op builds and registers, refuses CPU tensors, bad dtypes
(fp32; bf16 CPU tensors as CPU tensors) and bad shapes with clear errors, and its fake implementation gives
shapes to meta tensors and to a symbolic trace. `gpu`: correctness against torch.matmul over a
sweep of shapes in both B layouts (and copied strides, unaligned pointers, empty sizes), the
current stream, autograd, torch.compile, Linear layers of a small MLP and of a tiny transformer
block swapped and checked against the original model; bf16 tensors on the same checks (a sweep
of odd shapes in both layouts, an unaligned a, a bf16 MLP swapped). Prints SKIPPED (exit 0) where torch, or
for `gpu` a CUDA device, is missing; exit 1 on any failure.
"""
import math
import sys
import time
import traceback

T0 = time.time()
failures = []


def say(msg):
    print(f"[{time.time() - T0:6.1f} s] {msg}", flush=True)


def check(cond, what):
    if not cond:
        failures.append(what)
        say(f"FAIL: {what}")
    return cond


def expect_error(fn, exc_type, fragment, what):
    try:
        fn()
    except exc_type as e:
        msg = str(e).split("\n")[0]
        check(fragment in msg, f"{what}: message {msg!r} lacks {fragment!r}")
        return msg
    except Exception as e:  # the wrong kind of error
        check(False, f"{what}: raised {type(e).__name__} ({str(e).splitlines()[0]!r}), expected {exc_type.__name__}")
        return None
    check(False, f"{what}: no error raised")
    return None


def cpu_tests(torch, kh):
    h = torch.float16
    a, b = torch.randn(64, 32, dtype=h), torch.randn(32, 48, dtype=h)
    msg = expect_error(lambda: torch.ops.kforge.hgemm(a, b), RuntimeError, "CUDA tensors only", "CPU tensors")
    say(f"CPU tensors refused: {msg}")
    expect_error(lambda: torch.ops.kforge.hgemm(a.float(), b.float()), TypeError, "is not supported", "fp32")
    # bf16 is served (on CUDA): a bf16 CPU pair is refused for its device, like fp16.
    expect_error(lambda: torch.ops.kforge.hgemm(a.bfloat16(), b.bfloat16()), RuntimeError, "CUDA tensors only",
                 "bf16 CPU tensors")
    expect_error(lambda: torch.ops.kforge.hgemm(a, b.bfloat16()), TypeError, "same dtype", "fp16 with bf16")
    expect_error(lambda: torch.ops.kforge.hgemm(a, b.float()), TypeError, "same dtype", "mixed dtypes")
    expect_error(lambda: torch.ops.kforge.hgemm(a, torch.randn(31, 48, dtype=h)), ValueError, "their K differ",
                 "K mismatch")
    expect_error(lambda: torch.ops.kforge.hgemm(a.unsqueeze(0), b), ValueError, "must be 2-D", "3-D a")
    expect_error(lambda: torch.ops.kforge.hgemm(a, b[0]), ValueError, "must be 2-D", "1-D b")
    expect_error(lambda: kh.linear(a, torch.randn(16, 31, dtype=h)), ValueError, "in_features = 31", "linear shapes")
    # Meta tensors: the fake implementation gives the shape and dtype and checks K.
    am, bm = torch.empty(5, 7, dtype=h, device="meta"), torch.empty(7, 3, dtype=h, device="meta")
    cm = torch.ops.kforge.hgemm(am, bm)
    check(tuple(cm.shape) == (5, 3) and cm.dtype == h and cm.device.type == "meta", f"meta output {cm}")
    check(tuple(torch.ops.kforge.hgemm(am, torch.empty(3, 7, dtype=h, device="meta").t()).shape) == (5, 3),
          "meta with a transposed b")
    expect_error(lambda: torch.ops.kforge.hgemm(am, torch.empty(6, 3, dtype=h, device="meta")), RuntimeError,
                 "their K differ", "meta K mismatch")
    # A symbolic trace (as torch.compile's front end makes) goes through the fake implementation.
    from torch.fx.experimental.proxy_tensor import make_fx
    g = make_fx(lambda x, y: torch.ops.kforge.hgemm(x, y).relu(), tracing_mode="symbolic")(a, b)
    check("kforge.hgemm" in g.code, f"symbolic trace lacks the op:\n{g.code}")
    check(len(torch.ops.kforge.hgemm.default._schema.arguments) == 2, "schema")
    # swap_linears leaves CPU layers alone.
    model = torch.nn.Sequential(torch.nn.Linear(8, 8).half(), torch.nn.ReLU())
    check(kh.swap_linears(model) == [] and type(model[0]) is torch.nn.Linear, "a CPU Linear was swapped")
    v = kh.version()
    check(v.startswith("kforge_hgemm") or "kforge" in v, f"version {v!r}")
    say(f"library: {v}")
    # load(prefix=...): an installed package is found by its CMake package folder; a prefix
    # without one is refused with a message that says what was looked for.
    import subprocess, tempfile
    build = kh._EXPORT / "build"
    with tempfile.TemporaryDirectory() as prefix:
        r = subprocess.run(f"cmake --build {build} >/dev/null && cmake --install {build} --prefix {prefix} >/dev/null",
                           shell=True)
        if check(r.returncode == 0, "cmake --build/--install of the export"):
            inc, lib = kh._installed_library(prefix)
            check((inc / "kforge_hgemm.h").is_file() and lib.name == "libkforge_hgemm_static.a",
                  f"installed package resolved to {inc}, {lib}")
        expect_error(lambda: kh._installed_library(prefix + "/nothing"), kh.BuildError,
                     "holds no installed kforge_hgemm package", "a prefix without the package")


def rel_err(x, ref):
    return ((x.float() - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def gpu_tests(torch, kh):
    dev = torch.device("cuda")
    h = torch.float16
    gen = torch.Generator(device=dev).manual_seed(1234)
    rnd = lambda *s: torch.randn(*s, device=dev, dtype=h, generator=gen)
    say(f"device {torch.cuda.get_device_name()}, torch {torch.__version__} (CUDA {torch.version.cuda})")

    def compare(a, b, what):
        ref = a.float() @ b.float()
        ours = torch.ops.kforge.hgemm(a, b)
        theirs = torch.matmul(a, b)
        torch.cuda.synchronize()
        if not check(ours.shape == theirs.shape and ours.dtype == a.dtype and ours.is_contiguous(),
                     f"{what}: output {tuple(ours.shape)} {ours.dtype} contiguous={ours.is_contiguous()}"):
            return
        if ref.numel() == 0 or ref.abs().max() == 0:
            check(torch.equal(ours, theirs), f"{what}: empty/zero result differs from torch.matmul")
            return
        e_ours, e_torch = rel_err(ours, ref), rel_err(theirs, ref)
        # fp32 accumulation and one fp16 rounding: the error is that of torch.matmul's cuBLAS, within
        # a factor (different summation order), never an fp16-accumulation-sized one.
        ok = e_ours <= 2.0 * e_torch + 2e-4 and torch.isfinite(ours).all().item()
        check(ok, f"{what}: relative error {e_ours:.3g} vs torch.matmul's {e_torch:.3g}")
        return e_ours, e_torch

    # The sweep: sizes around the kernels' alignment (8) and tiles (64, 128, 256), both layouts.
    ms, ns, ks = (1, 7, 64, 129, 1000), (1, 8, 100, 256, 1032), (1, 8, 63, 520, 2048)
    n_cases, worst = 0, 0.0
    for m in ms:
        for n in ns:
            for k in ks:
                a = rnd(m, k)
                for layout in ("nn", "tn"):
                    b = rnd(k, n) if layout == "nn" else rnd(n, k).t()
                    r = compare(a, b, f"{m}x{n}x{k} {layout}")
                    if r:
                        worst = max(worst, r[0] / max(r[1], 1e-6))
                    n_cases += 1
    say(f"sweep: {n_cases} cases ({len(ms)}x{len(ns)}x{len(ks)} shapes x 2 layouts), worst error ratio to "
        f"torch.matmul {worst:.2f}")
    for m, n, k in ((4096, 4096, 4096), (1536, 1536, 1536), (7, 12288, 4096), (16384, 8, 4096), (1000, 1001, 1003),
                    (3072, 768, 3072)):
        a = rnd(m, k)
        for layout in ("nn", "tn"):
            b = rnd(k, n) if layout == "nn" else rnd(n, k).t()
            r = compare(a, b, f"{m}x{n}x{k} {layout}")
            if r:
                say(f"{m}x{n}x{k} {layout}: variant {kh.variant(m, n, k, layout == 'tn')}, error {r[0]:.2e} "
                    f"(torch.matmul {r[1]:.2e})")
    # bf16 (issue 18): the library's bf16 variants against torch.matmul in bf16 (cuBLAS, fp32
    # accumulation): the same bound (one bf16 rounding each; the 2e-4 floor is far below bf16's
    # 2^-8), on odd sizes, both layouts, a decode shape and an unaligned a.
    rb = lambda *s: torch.randn(*s, device=dev, dtype=torch.bfloat16, generator=gen)
    n_bf16 = 0
    for m, n, k in ((1, 8, 8), (7, 100, 63), (129, 256, 520), (1000, 1032, 2048), (7, 12288, 4096), (16384, 8, 4096),
                    (1000, 1001, 1003), (4096, 4096, 4096)):
        a = rb(m, k)
        for layout in ("nn", "tn"):
            b = rb(k, n) if layout == "nn" else rb(n, k).t()
            r = compare(a, b, f"bf16 {m}x{n}x{k} {layout}")
            n_bf16 += 1
            if r and m * n * k >= 1 << 30:
                say(f"bf16 {m}x{n}x{k} {layout}: variant {kh.variant(m, n, k, layout == 'tn', torch.bfloat16)}, "
                    f"error {r[0]:.2e} (torch.matmul {r[1]:.2e})")
    flat_b = rb(128 * 512 + 1)
    compare(flat_b[1:].view(128, 512), rb(512, 256), "bf16 a at a 2-byte offset")
    check(kh.variant(4096, 4096, 4096, True, torch.bfloat16).find("bf16") >= 0,
          f"bf16 variant name {kh.variant(4096, 4096, 4096, True, torch.bfloat16)!r}")
    say(f"bf16: {n_bf16 + 1} cases")
    # Strides: a sliced a and b (copied), a broadcast b, an unaligned a (the sm_80 path).
    base = rnd(256, 1024)
    compare(base[:, :512], rnd(512, 384), "a with row stride 1024 (copied)")
    compare(rnd(128, 512), rnd(512, 768)[:, ::2], "b with column stride 2 (copied)")
    compare(rnd(128, 512), rnd(1, 384).expand(512, 384), "broadcast b (copied)")
    flat = rnd(128 * 512 + 1)
    compare(flat[1:].view(128, 512), rnd(512, 256), "a at a 2-byte offset")
    compare(rnd(128, 512), rnd(256, 512).t(), "b.t() of a row-major (N, K)")
    for m, n, k in ((0, 16, 16), (16, 0, 16), (16, 16, 0)):
        compare(rnd(m, k), rnd(k, n), f"empty {m}x{n}x{k}")
    # Refusals on the GPU.
    a, b = rnd(64, 32), rnd(32, 48)
    expect_error(lambda: torch.ops.kforge.hgemm(a.float(), b.float()), TypeError, "is not supported", "fp32 CUDA")
    expect_error(lambda: torch.ops.kforge.hgemm(a, b.cpu()), RuntimeError, "CUDA tensors only", "mixed devices")

    # The current stream: the op's input is written on a side stream after a long sleep; the op,
    # enqueued on that stream, must see the written values (on another stream it reads zeros).
    s = torch.cuda.Stream()
    x = torch.zeros(512, 512, device=dev, dtype=h)
    src, w = rnd(512, 512), rnd(512, 512)
    torch.cuda.synchronize()
    with torch.cuda.stream(s):
        torch.cuda._sleep(200_000_000)  # ~0.1 s of GPU time
        x.copy_(src)
        y = torch.ops.kforge.hgemm(x, w)
    s.synchronize()
    check(rel_err(y, src.float() @ w.float()) < 1e-2, "the op did not run in order on the current (side) stream")

    # Autograd through the op (both gradients), against torch.matmul's.
    a, b = rnd(96, 200).requires_grad_(), rnd(200, 72).requires_grad_()
    g = rnd(96, 72)
    (torch.ops.kforge.hgemm(a, b) * g).sum().backward()
    ga, gb = a.grad.clone(), b.grad.clone()
    a.grad = b.grad = None
    (torch.matmul(a, b) * g).sum().backward()
    check(rel_err(ga, a.grad.float()) < 1e-2 and rel_err(gb, b.grad.float()) < 1e-2, "autograd gradients")
    # torch.compile traces the op (fake tensors, dynamic shapes) and runs it.
    import torch._dynamo
    torch._dynamo.reset()
    f = torch.compile(lambda p, q: torch.relu(torch.ops.kforge.hgemm(p, q)) + 1, fullgraph=True, dynamic=True,
                      backend="aot_eager")
    for m, n, k in ((64, 128, 256), (100, 72, 520)):
        p, q = rnd(m, k), rnd(k, n)
        check(rel_err(f(p, q), torch.relu(p.float() @ q.float()) + 1) < 1e-2, f"torch.compile {m}x{n}x{k}")
    from torch.library import opcheck
    try:
        opcheck(torch.ops.kforge.hgemm.default, (rnd(64, 128), rnd(128, 32)))
        say("opcheck: schema, fake, autograd registration and dispatch agree")
    except Exception as e:
        check(False, f"torch.library.opcheck: {str(e).splitlines()[0]}")

    # Linear layers swapped: a 2-layer MLP and a tiny transformer block, fp16, against the original.
    nn = torch.nn
    torch.manual_seed(0)

    class Block(nn.Module):
        def __init__(self, d=256, heads=4, mlp=4):
            super().__init__()
            self.heads = heads
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc1, self.fc2 = nn.Linear(d, mlp * d), nn.Linear(mlp * d, d, bias=False)

        def forward(self, x):
            bsz, t, d = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(bsz, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
            att = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(att.transpose(1, 2).reshape(bsz, t, d))
            return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x))))

    import copy
    models = {
        "mlp": (nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 256)), (64, 512)),
        "transformer": (nn.Sequential(nn.Embedding(1000, 256), Block(), Block()), None),
    }
    for name, (model, shape) in models.items():
        ref32 = copy.deepcopy(model).to(dev).float().eval()
        orig = model.to(dev).half().eval()
        swapped = copy.deepcopy(orig)
        names = kh.swap_linears(swapped)
        n_lin = sum(type(mod) is nn.Linear for mod in orig.modules())
        check(len(names) == n_lin and n_lin > 0, f"{name}: {len(names)} of {n_lin} Linear layers swapped")
        with torch.no_grad():
            inp = (torch.randint(0, 1000, (4, 64), device=dev) if shape is None
                   else torch.randn(*shape, device=dev, dtype=h, generator=gen))
            want = ref32(inp if shape is None else inp.float())
            y_orig, y_ours = orig(inp), swapped(inp)
        e_orig, e_ours = rel_err(y_orig, want), rel_err(y_ours, want)
        e_pair = rel_err(y_ours, y_orig.float())
        check(e_ours <= 2 * e_orig + 1e-3 and e_pair < 1e-2,
              f"{name}: swapped model's error {e_ours:.3g} (original fp16 {e_orig:.3g}, between them {e_pair:.3g})")
        say(f"{name}: {len(names)} Linear layers swapped ({', '.join(names)}); error vs fp32: swapped {e_ours:.2e}, "
            f"original {e_orig:.2e}; between them {e_pair:.2e}")

    # A bf16 MLP: swap_linears' default dtypes take bf16 layers too; against the fp32 model as above
    # (between the two bf16 models: two bf16 roundings of each layer, ~2^-8 relative each).
    mlp = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 256))
    ref32 = copy.deepcopy(mlp).to(dev).float().eval()
    orig = mlp.to(dev).bfloat16().eval()
    swapped = copy.deepcopy(orig)
    names = kh.swap_linears(swapped)
    check(len(names) == 2, f"bf16 mlp: {len(names)} of 2 Linear layers swapped")
    with torch.no_grad():
        x = torch.randn(64, 512, device=dev, generator=gen)
        want, y_orig, y_ours = ref32(x), orig(x.bfloat16()), swapped(x.bfloat16())
    e_orig, e_ours, e_pair = rel_err(y_orig, want), rel_err(y_ours, want), rel_err(y_ours, y_orig.float())
    check(y_ours.dtype == torch.bfloat16 and e_ours <= 2 * e_orig + 1e-3 and e_pair < 5e-2,
          f"bf16 mlp: swapped model's error {e_ours:.3g} (original bf16 {e_orig:.3g}, between them {e_pair:.3g})")
    say(f"bf16 mlp: error vs fp32: swapped {e_ours:.2e}, original {e_orig:.2e}; between them {e_pair:.2e}")


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("cpu", "gpu"):
        print("usage: test_hgemm_torch.py cpu|gpu EXPORT_DIR", file=sys.stderr)
        return 2
    mode, export = sys.argv[1], sys.argv[2]
    try:
        import torch
    except ImportError:
        print("SKIPPED: torch is not installed for this python3 (KFORGE_WITH_TORCH=1 scripts/install-deps.sh)")
        return 0
    if torch.version.cuda is None:
        print(f"SKIPPED: torch {torch.__version__} is a CPU-only build; the op links torch's CUDA libraries "
              "(c10_cuda, torch_cuda): install a CUDA build of torch (no GPU needed to build)")
        return 0
    if mode == "gpu" and not torch.cuda.is_available():
        print("SKIPPED: torch sees no CUDA device")
        return 0
    sys.path.insert(0, f"{export}/torch")
    import kforge_hgemm_torch as kh
    t = time.time()
    kh.load()
    say(f"load(): {time.time() - t:.1f} s (library and op built or reused)")
    try:
        (cpu_tests if mode == "cpu" else gpu_tests)(torch, kh)
    except Exception:
        failures.append("exception: " + traceback.format_exc().splitlines()[-1])
        traceback.print_exc()
    if failures:
        say(f"{len(failures)} FAILED: " + "; ".join(failures[:10]))
        return 1
    say("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
