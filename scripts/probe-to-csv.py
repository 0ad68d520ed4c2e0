#!/usr/bin/env python3
"""Turn an offgrid-probe run (scripts/gpu-check.sh offgrid-probe: offgrid-probe-variants.csv and
offgrid-probe-resident.txt) into the per-variant table the cost model's decode terms are fitted
on and tested against (the format of data/hgemm/probes/decode-variants-h100.csv): one row per
probed shape and Hopper variant (stream-K and multicast left out, as there), with the CTAs of the
variant resident at once on that GPU and its median time. Writes to stdout.

  scripts/probe-to-csv.py offgrid-probe-variants.csv offgrid-probe-resident.txt --gpu "NVIDIA H200"
"""
import argparse
import csv
import re
import sys


def fail(msg):
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(2)

VARIANT = re.compile(r"sm90_(tn|nn)_f32_\d+x\d+_s\d+_c\d_k\d+_g\d+_(\w+)$")


def residents(path):
    """(shape, variant) -> resident CTAs, from `kforge hgemm variants --shape` listings."""
    out, shape = {}, None
    with open(path) as f:
        for line in f:
            if line.startswith("== "):
                shape = line[3:].strip()
                continue
            cols = line.split()
            if shape and cols and VARIANT.match(cols[0]) and len(cols) >= 12:
                # ... resident CTAs waves predicted [us]: the resident column is 4th (or 5th) from the end.
                res = cols[-5] if cols[-1] == "us" else cols[-4]
                if res.isdigit():
                    out[(shape, cols[0])] = int(res)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("variants_csv")
    ap.add_argument("resident_txt")
    ap.add_argument("--gpu", default="", help="the GPU's name, for the header")
    a = ap.parse_args()
    for path in (a.variants_csv, a.resident_txt):
        try:
            open(path).close()
        except OSError as e:
            fail(f"cannot read {path}: {e.strerror}; give the offgrid-probe stage's output files")
    res = residents(a.resident_txt)
    if not res:
        fail(f"no resident counts in {a.resident_txt}: give the offgrid-probe stage's offgrid-probe-resident.txt")
    rows = 0
    w = sys.stdout
    w.write(f"# Every Hopper variant timed per decode shape, graph mode, on {a.gpu or 'the probed GPU'}\n")
    w.write("# (scripts/gpu-check.sh offgrid-probe, scripts/probe-to-csv.py): the median time and the CTAs\n")
    w.write("# of the variant resident at once (whole clusters).\n")
    w.write("m,n,k,variant,resident,median_us\n")
    with open(a.variants_csv) as f:
        for r in csv.DictReader(f):
            if r.get("impl") != "ours_all":
                continue
            name = r["algo"].split()[0]
            m = VARIANT.match(name)
            if not m or m.group(2) in ("sk", "mc2"):
                continue
            shape = f"{r['m']}x{r['n']}x{r['k']}"
            if (shape, name) not in res:
                continue
            w.write(f"{r['m']},{r['n']},{r['k']},{name},{res[(shape, name)]},{r['median_us']}\n")
            rows += 1
    if rows == 0:
        fail(f"no ours_all rows of Hopper variants in {a.variants_csv}: give the offgrid-probe stage's offgrid-probe-variants.csv")
    print(f"{rows} rows", file=sys.stderr)


if __name__ == "__main__":
    main()
