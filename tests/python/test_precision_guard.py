"""guards.precision_lowered: a precision switch counts against a candidate only when it lowers the
precision the judge set, never when it is set again to full precision.

    python3 tests/python/test_precision_guard.py        (also run by the C++ unit tests)
"""

import os
import sys
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir, os.pardir))
sys.path.insert(0, os.path.join(ROOT, "python"))

from kforge_worker import guards  # noqa: E402


class PrecisionLowered(unittest.TestCase):
    def test_full_precision_set_again_is_not_a_downgrade(self):
        # torch 2.11 records allow_tf32 = False as fp32_precision 'ieee' where it read 'none'
        self.assertFalse(guards.precision_lowered("fp32_precision.cuda.matmul", "none", "ieee"))
        self.assertFalse(guards.precision_lowered("fp32_precision.cuda.conv", "ieee", "none"))
        self.assertFalse(guards.precision_lowered("cuda.matmul.allow_tf32", True, False))
        self.assertFalse(guards.precision_lowered("float32_matmul_precision", "high", "highest"))
        self.assertFalse(guards.precision_lowered("default_dtype", "torch.float32", "torch.float64"))
        self.assertFalse(guards.precision_lowered("autocast.cuda", False, False))

    def test_every_lower_precision_is(self):
        self.assertTrue(guards.precision_lowered("fp32_precision.cuda.matmul", "none", "tf32"))
        self.assertTrue(guards.precision_lowered("fp32_precision.mkldnn.matmul", "ieee", "bf16"))
        self.assertTrue(guards.precision_lowered("fp32_precision.generic.all", "none", "tf32"))
        self.assertTrue(guards.precision_lowered("cuda.matmul.allow_tf32", False, True))
        self.assertTrue(guards.precision_lowered("cudnn.allow_tf32", False, True))
        self.assertTrue(guards.precision_lowered("cuda.matmul.fp16_accumulation", False, True))
        self.assertTrue(guards.precision_lowered("autocast.cpu", False, True))
        self.assertTrue(guards.precision_lowered("float32_matmul_precision", "highest", "high"))
        self.assertTrue(guards.precision_lowered("float32_matmul_precision", "highest", "medium"))
        self.assertTrue(guards.precision_lowered("default_dtype", "torch.float32", "torch.float16"))
        self.assertTrue(guards.precision_lowered("default_dtype", "torch.float32", "torch.bfloat16"))

    def test_unknown_keys_and_values_count_any_change(self):
        self.assertTrue(guards.precision_lowered("fp32_precision.cuda.matmul", "none", "fp8"))
        self.assertTrue(guards.precision_lowered("fp32_precision.cuda.matmul", "none", None))
        self.assertTrue(guards.precision_lowered("something.new", 1, 2))
        self.assertTrue(guards.precision_lowered("cuda.matmul.allow_tf32", False, None))
        self.assertFalse(guards.precision_lowered("something.new", 1, 1))

    def test_every_watched_switch_has_a_rule_or_counts_any_change(self):
        # each key precision_state reports is ranked or boolean-ordered; raising it is never lowering
        try:
            import torch
        except ImportError:
            self.skipTest("torch is not installed")
        state = guards.precision_state(torch)
        for key, value in state.items():
            self.assertFalse(guards.precision_lowered(key, value, value), key)


if __name__ == "__main__":
    unittest.main()
