"""Process hardening for the judge and the executor (Linux; every step is best effort and says
whether it took effect).

- The judge makes itself non-dumpable (PR_SET_DUMPABLE 0): a process of the same user can then
  neither read nor write its memory (/proc/PID/mem, process_vm_*) nor open its file descriptors
  through /proc/PID/fd (the reply pipe to kforge). It is a child subreaper, so a grandchild that
  double-forks away from the executor is re-parented to the judge, where `descendants()` finds it.
- The executor asks to be killed when the judge dies (PR_SET_PDEATHSIG) and installs a seccomp
  filter before it imports candidate code: ptrace, process_vm_readv/writev and setsid fail with
  EPERM (no tracing another process, no session of its own for a child). setpgid stays allowed:
  torch's extension builder runs ninja, which starts every compiler in a process group of its own
  (posix_spawn with POSIX_SPAWN_SETPGROUP; refused, every CUDA candidate failed to build on the
  H200 with "ninja: fatal: posix_spawn"). A process that leaves the group and outlives its step
  is found by the judge's process listing (it is a child subreaper) and rejects.
- Every process that runs candidate code (the executor, the extension build) drops all its
  capabilities first (`drop_capabilities`): kforge run as root keeps CAP_SYS_PTRACE, which opens
  a non-dumpable process's /proc/PID/fd and /proc/PID/mem anyway (the judge's arenas, its memory,
  its reply pipe to kforge). Without capabilities a root process is an ordinary user towards
  non-dumpable processes, and no_new_privs (set with the seccomp filter) keeps execve from giving
  them back.
"""

import ctypes
import fcntl
import os
import time
import platform
import signal
import struct

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_SECCOMP = 22
PR_SET_NO_NEW_PRIVS = 38
PR_SET_CHILD_SUBREAPER = 36
PR_CAPBSET_DROP = 24
PR_SET_SECUREBITS = 28
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
# SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP | ..._LOCKED | SECBIT_KEEP_CAPS_LOCKED
# | SECBIT_NO_CAP_AMBIENT_RAISE | ..._LOCKED: uid 0 means no capabilities, for good
_SECUREBITS = 0x01 | 0x02 | 0x04 | 0x08 | 0x20 | 0x40 | 0x80
SECCOMP_MODE_FILTER = 2

_libc = None


def _prctl(*args):
    global _libc
    try:
        if _libc is None:
            _libc = ctypes.CDLL(None, use_errno=True)
        args = list(args) + [0] * (5 - len(args))
        return _libc.prctl(*[ctypes.c_ulong(a) if isinstance(a, int) else a for a in args]) == 0
    except Exception:
        return False


def harden_judge():
    # KFORGE_JUDGE_DUMPABLE=1 keeps the judge dumpable (for a debugger; or should a driver's CUDA IPC
    # ever need it): the verdict's details.judge_hardening says so.
    keep = os.environ.get("KFORGE_JUDGE_DUMPABLE") == "1"
    return {"non_dumpable": False if keep else _prctl(PR_SET_DUMPABLE, 0),
            "subreaper": _prctl(PR_SET_CHILD_SUBREAPER, 1)}


def non_dumpable():
    return _prctl(PR_SET_DUMPABLE, 0)


def capabilities_of(pid):
    """A process's effective capability set as /proc/PID/status writes it (hex), None when unknown
    (the judge reads its executor's: status is readable whatever the target's dumpable flag)."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return line.split()[1]
    except OSError:
        pass
    return None


def capabilities():
    """This process's effective capability set (an int), None when unknown."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return int(line.split()[1], 16)
    except (OSError, ValueError):
        pass
    return None


def drop_capabilities():
    """Drops every capability of this process (and of everything it starts): secure bits that
    make uid 0 ordinary, the bounding set emptied, the ambient set cleared, then the effective,
    permitted and inheritable sets zeroed by capset. Returns True when no capability is left."""
    if capabilities() == 0:
        return True
    global _libc
    try:
        if _libc is None:
            _libc = ctypes.CDLL(None, use_errno=True)
    except Exception:
        return False
    _prctl(PR_SET_SECUREBITS, _SECUREBITS)
    for cap in range(64):
        _prctl(PR_CAPBSET_DROP, cap)
    _prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]

    hdr = Header(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
    data = (Data * 2)()
    try:
        _libc.capset(ctypes.byref(hdr), data)
    except Exception:
        pass
    return capabilities() == 0


def legacy_cuda_ipc_env(env=None):
    """Take expandable_segments out of PYTORCH_CUDA_ALLOC_CONF (in `env`, default os.environ),
    before torch is imported. The judge shares its GPU arenas with the executors by CUDA IPC; with
    expandable segments torch exports them as file descriptors that the importer must take with
    pidfd_getfd, a ptrace-mode check on the judge, which is non-dumpable and whose executors hold
    no capabilities: every import would fail (`pidfd_getfd: Operation not permitted`), and every
    GPU verdict with it. Legacy IPC handles need no such access. RL setups often set the option
    for the trainer; the judge's own allocator does not need it. Returns the entries removed."""
    env = os.environ if env is None else env
    conf = env.get("PYTORCH_CUDA_ALLOC_CONF")
    if not conf:
        return []
    keep, removed = [], []
    for part in conf.split(","):
        key = part.split(":", 1)[0].strip()
        (removed if key == "expandable_segments" else keep).append(part)
    if removed:
        if any(p.strip() for p in keep):
            env["PYTORCH_CUDA_ALLOC_CONF"] = ",".join(keep)
        else:
            del env["PYTORCH_CUDA_ALLOC_CONF"]
    return removed


def die_with_parent():
    return _prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL))


# syscall numbers of what the executor may not do, per architecture (audit arch, numbers)
_DENY = {
    "x86_64": (0xC000003E, {"ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "setsid": 112}),
    "aarch64": (0xC00000B7, {"ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271, "setsid": 157}),
}


def install_seccomp():
    """A classic BPF filter: calls in _DENY return EPERM, everything else is allowed. Returns the
    names denied, or [] when the filter could not be installed."""
    arch = _DENY.get(platform.machine())
    if arch is None:
        return []
    audit, calls = arch
    names = sorted(calls)
    ld_abs, jeq, ret = 0x20, 0x15, 0x06
    allow, deny = 0x7FFF0000, 0x00050000 | 1  # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO | EPERM
    n = len(names)
    prog = [(ld_abs, 0, 0, 4),                  # arch
            (jeq, 0, n + 1, audit),             # another arch: allow
            (ld_abs, 0, 0, 0)]                  # nr
    for i, name in enumerate(names):
        prog.append((jeq, n - i, 0, calls[name]))  # match: jump to deny
    prog.append((ret, 0, 0, allow))
    prog.append((ret, 0, 0, deny))
    raw = b"".join(struct.pack("HBBI", *ins) for ins in prog)
    buf = ctypes.create_string_buffer(raw, len(raw))

    class Fprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fp = Fprog(len(prog), ctypes.cast(buf, ctypes.c_void_p))
    if not _prctl(PR_SET_NO_NEW_PRIVS, 1):
        return []
    try:
        ok = _libc.prctl(ctypes.c_int(PR_SET_SECCOMP), ctypes.c_ulong(SECCOMP_MODE_FILTER), ctypes.byref(fp),
                         ctypes.c_ulong(0), ctypes.c_ulong(0)) == 0
    except Exception:
        ok = False
    return names if ok else []


# ------------------------------------------------------------------------------------------------
# process trees

def _stat(pid):
    """(ppid, pgid, state) of a process, None when it is gone."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            s = f.read().decode("ascii", "replace")
    except OSError:
        return None
    rest = s[s.rfind(")") + 2:].split()
    try:
        return int(rest[1]), int(rest[2]), rest[0]
    except (IndexError, ValueError):
        return None


def all_processes():
    out = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = _stat(int(name))
            if st is not None:
                out[int(name)] = st
    return out


def descendants(root, procs=None):
    """pid -> (ppid, pgid, state) of every living process below `root` (zombies left out)."""
    procs = procs if procs is not None else all_processes()
    children = {}
    for pid, (ppid, _, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = {}, list(children.get(root, []))
    while todo:
        pid = todo.pop()
        if pid in out:
            continue
        if procs[pid][2] != "Z":
            out[pid] = procs[pid]
        todo.extend(children.get(pid, []))
    return out


def signal_all(pids, sig):
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass


def child_subreaper():
    """Orphans below this process are re-parented to it (not to init), where descendants() sees them."""
    return _prctl(PR_SET_CHILD_SUBREAPER, 1)


def kill_descendants(rounds=50):
    """SIGKILL to every living process below this one, whatever its group or session (this process
    must be a child subreaper, or a double fork escapes the listing), until none is left: a killed
    process forks no more, so each round can only find children started before the last one.
    Returns pid -> (ppid, pgid, state) of those killed."""
    me, killed = os.getpid(), {}
    for _ in range(rounds):
        left = descendants(me)
        if not left:
            break
        signal_all(left, signal.SIGKILL)
        killed.update(left)
        # reap what is ours, so that zombies do not pile up (the rest are reaped by their parents)
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
        time.sleep(0.005)
    return killed


def scheduling(pid):
    """What decides how much CPU a process gets, per thread: tid -> (affinity, nice, policy), and
    the process's cgroup and autogroup (its session's nice value). Any process of the same user may
    change another's affinity, raise its nice value or its autogroup's, make it SCHED_IDLE or (where
    cgroupfs is writable) move it: the judge compares its baseline executor's with what it was
    after the baseline's own last request."""
    threads = {}
    try:
        tids = [int(t) for t in os.listdir("/proc/%d/task" % pid)]
    except OSError:
        tids = [pid]
    for tid in tids:
        try:
            threads[tid] = (tuple(sorted(os.sched_getaffinity(tid))), os.getpriority(os.PRIO_PROCESS, tid),
                            os.sched_getscheduler(tid))
        except OSError:
            pass  # a thread that ended meanwhile
    out = {"threads": threads}
    for key in ("cgroup", "autogroup"):  # autogroup: the session's share of the CPU ("/autogroup-N nice K")
        try:
            with open("/proc/%d/%s" % (pid, key), "rb") as f:
                out[key] = f.read()
        except OSError:
            out[key] = None
    return out


def scheduling_changes(before, now):
    """Threads present in both whose affinity, nice value or policy differ, and a changed cgroup."""
    out = []
    for tid, st in now["threads"].items():
        old = before["threads"].get(tid)
        if old is not None and old != st:
            out.append("thread %d: affinity %s nice %d policy %d, was affinity %s nice %d policy %d" %
                       ((tid,) + (_cpus(st[0]), st[1], st[2]) + (_cpus(old[0]), old[1], old[2])))
    for key in ("cgroup", "autogroup"):
        if before.get(key) is not None and now.get(key) is not None and before[key] != now[key]:
            out.append("%s %r, was %r" % (key, now[key][:80], before[key][:80]))
    return out


def _cpus(cpus):
    return ",".join(str(c) for c in cpus[:16]) + (",..." if len(cpus) > 16 else "")


def signal_group(pgid, sig):
    try:
        os.killpg(pgid, sig)
        return True
    except OSError:
        return False


# ------------------------------------------------------------------------------------------------
# one GPU, one judge at a time (the same lock file as src/gpu/device_lock.hpp: flock on
# $KFORGE_LOCK_DIR/kforge-gpu-<uuid>.lock, default /tmp)

def gpu_uuid(torch, index):
    """The device's UUID as nvidia-smi (and kforge's C++ side) write it: GPU-xxxxxxxx-xxxx-..."""
    u = torch.cuda.get_device_properties(index).uuid
    raw = getattr(u, "bytes", None)
    h = bytes(raw).hex() if raw is not None and len(raw) == 16 else str(u).lower().replace("gpu-", "").replace("-", "")
    return "GPU-%s-%s-%s-%s-%s" % (h[0:8], h[8:12], h[12:16], h[16:20], h[20:32])


def gpu_lock_path(uuid):
    name = "".join(c if (c.isascii() and c.isalnum()) or c == "-" else "_" for c in uuid) or "unknown"
    return os.path.join(os.environ.get("KFORGE_LOCK_DIR") or "/tmp", "kforge-gpu-%s.lock" % name)


def gpu_lock(uuid, wait_s, tick=None, tick_s=5.0):
    """Waits up to wait_s for the device's lock (calling tick() every tick_s while it waits).
    Returns (fd or None, seconds waited, why): None with why starting "the GPU was held" when
    another process kept it, or "cannot ..." when the lock file is unusable."""
    path = gpu_lock_path(uuid)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    except OSError as e:
        return None, 0.0, "cannot open the GPU lock %s: %s" % (path, e.strerror)
    try:
        os.fchmod(fd, 0o666)
    except OSError:
        pass
    t0 = last = time.monotonic()
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            pass
        except OSError as e:
            os.close(fd)
            return None, time.monotonic() - t0, "cannot lock %s: %s" % (path, e.strerror)
        now = time.monotonic()
        if now - t0 >= wait_s:
            holder = os.pread(fd, 31, 0).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            return None, now - t0, ("the GPU was held by another kforge process (pid %s, lock %s) for %d s"
                                    % (holder, path, int(wait_s)))
        if tick is not None and now - last >= tick_s:
            tick()
            last = now
        time.sleep(0.005)
    waited = time.monotonic() - t0
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, b"%d\n" % os.getpid(), 0)
    except OSError:
        pass
    return fd, waited, ""
