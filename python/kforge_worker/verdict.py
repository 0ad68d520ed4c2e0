"""Verdicts in the JSON shape of src/eval/verdict.hpp (same fields, same reason codes)."""

import math


def percentile(xs, p):
    s = sorted(xs)
    if not s:
        return float("nan")
    pos = p * (len(s) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def summarize(xs):
    xs = [float(x) for x in xs]
    if not xs:
        return {"n": 0, "median": 0, "mean": 0, "min": 0, "max": 0, "p10": 0, "p90": 0}
    return {"n": len(xs), "median": percentile(xs, 0.5), "mean": sum(xs) / len(xs), "min": min(xs),
            "max": max(xs), "p10": percentile(xs, 0.1), "p90": percentile(xs, 0.9)}


class Verdict:
    def __init__(self, name):
        self.d = {"candidate": name, "correct": False, "reasons": [], "flags": [], "message": "",
                  "speedup": {}, "candidate_us": {}, "baseline_us": {}, "reward": 0.0, "details": {}}

    def reject(self, code, why):
        self.d["correct"] = False
        if code not in self.d["reasons"]:
            self.d["reasons"].append(code)
        if not self.d["message"]:
            self.d["message"] = why

    def flag(self, f):
        if f not in self.d["flags"]:
            self.d["flags"].append(f)
