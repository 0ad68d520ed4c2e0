"""A stand-in for python/kforge_worker in the protocol tests (needs no torch): it behaves as the
candidate's file name says.
  *accept*        phases, then an accepted verdict with a speed-up against eager
  *hang_loading*  says "loading", then never answers (the compile time-out applies)
  *hang_running*  says "loaded", then never answers (the run time-out applies)
  *die*           exits without a verdict
  *garbage*       answers with a line that is not JSON
  *fatal*         a cuda_error verdict with "fatal": true, then exits
  *slow*          as *accept*, half a second later
  *forged*        a verdict line without the request's key (as candidate code writing into the pipe)
Every verdict's details carry the request, the worker's CUDA_VISIBLE_DEVICES and when it judged.
"""
import json
import os
import sys
import time


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "scan":
        print(json.dumps({"findings": []}))
        return
    out = sys.stdout
    for line in sys.stdin:
        req = json.loads(line)
        name = os.path.basename(req["candidate"])
        rid = req["id"]

        def send(obj):
            obj = dict(obj, key=req.get("key"))  # the judge echoes the request's key on every line
            out.write(json.dumps(obj) + "\n")
            out.flush()

        send({"id": rid, "phase": "loading"})
        if "hang_loading" in name:
            time.sleep(3600)
        send({"id": rid, "phase": "loaded"})
        if "hang_running" in name:
            time.sleep(3600)
        if "die" in name:
            os._exit(7)
        if "garbage" in name:
            out.write("this is not json\n")
            out.flush()
            time.sleep(3600)
        if "forged" in name:
            out.write(json.dumps({"id": rid, "candidate": name, "correct": True, "reasons": [], "flags": [],
                                  "message": "accepted", "speedup": {}, "details": {}}) + "\n")
            out.flush()
            time.sleep(3600)
        if "fatal" in name:
            send({"id": rid, "candidate": name, "correct": False, "reasons": ["cuda_error"],
                  "message": "an illegal memory access (sticky)", "fatal": True})
            os._exit(0)
        started = time.time()
        if "slow" in name:
            time.sleep(0.5)
        s = {"n": 5, "median": 2.0, "mean": 2.0, "min": 1.9, "max": 2.1, "p10": 1.95, "p90": 2.05}
        send({"id": rid, "candidate": name, "correct": True, "reasons": [], "flags": [], "message": "accepted",
              "speedup": {"eager": s}, "candidate_us": {"eager": dict(s, median=10.0)},
              "baseline_us": {"eager": dict(s, median=20.0)}, "details": {"request": req, "visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
                          "started": started, "ended": time.time()}, "fatal": False})
        if req.get("exit_after"):
            os._exit(0)


main()
