"""The Python scanner (python/kforge_worker/scan.py) against the shared sample of both scanners.

tests/corpus/scan/agreement.cu is scanned with each rule set of data/scan-rules.json ("cuda" and
"torch"); the findings must be exactly tests/corpus/scan/agreement.json, which the C++ scanner
(src/eval/static_scan.cpp) is held to by tests/unit/test_static_scan.cpp. Needs python3 only:

    python3 tests/python/test_scan_agreement.py        (also run by the C++ unit tests)
"""

import json
import os
import sys
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir, os.pardir))
sys.path.insert(0, os.path.join(ROOT, "python"))

from kforge_worker import scan  # noqa: E402

SAMPLE = os.path.join(ROOT, "tests", "corpus", "scan")


def brief(findings):
    return ["%s:%s@%d" % (rule, symbol, line) for line, rule, symbol in findings]


class ScanAgreement(unittest.TestCase):
    def setUp(self):
        with open(os.path.join(SAMPLE, "agreement.json"), encoding="utf-8") as f:
            self.expected = json.load(f)
        with open(os.path.join(SAMPLE, self.expected["sample"]), encoding="utf-8") as f:
            self.source = f.read()

    def test_cuda_rules(self):
        self.assertEqual(brief(scan.cpp_findings(self.source, "cuda")), self.expected["cuda"])

    def test_torch_rules(self):
        self.assertEqual(brief(scan.cpp_findings(self.source, "torch")), self.expected["torch"])

    def test_one_rule_file(self):
        # The rule names the scanners report are the file's, and cudaDeviceSynchronize means one thing.
        rules = scan.RULES["rules"]
        for e in scan.RULES["cpp"]:
            self.assertIn(e["rule"], rules, e)
            self.assertTrue(set(e["scanners"]) <= {"cuda", "torch"}, e)
        for table in ("modules", "os_attrs", "os_prefixes", "sys_attrs", "builtin_calls"):
            for rule in scan.RULES["python"][table].values():
                self.assertIn(rule, rules, table)
        sync = [e for e in scan.RULES["cpp"] if e["pattern"] == "cudaDeviceSynchronize"]
        self.assertEqual([e["rule"] for e in sync], ["device_sync"])
        self.assertEqual(sync[0]["scanners"], ["cuda", "torch"])

    def test_rules_file_override(self):
        # $KFORGE_SCAN_RULES names the file (read at import).
        self.assertTrue(os.path.samefile(scan._rules_path(), os.environ.get(
            "KFORGE_SCAN_RULES", os.path.join(ROOT, "data", "scan-rules.json"))))


class SourceEncodings(unittest.TestCase):
    """A candidate is text in the encoding Python reads it in (PEP 263), not necessarily UTF-8."""

    def test_declared_latin1_is_text(self):
        raw = b"# -*- coding: latin-1 -*-\nimport torch\nNAME = 'caf\xe9'\nclass ModelNew(torch.nn.Module):\n    pass\n"
        src = scan.decode_source(raw)
        self.assertEqual(src.splitlines()[2], "NAME = 'caf\u00e9'")
        self.assertEqual(scan.scan_source(src), [])

    def test_undeclared_latin1_is_not_text(self):
        self.assertIsNone(scan.decode_source(b"x = 'caf\xe9'\n"))
        self.assertEqual(scan.decode_source(b"\xef\xbb\xbfx = 1\n"), "x = 1\n")  # a UTF-8 BOM is fine


if __name__ == "__main__":
    unittest.main()
