"""sandbox.legacy_cuda_ipc_env: expandable_segments leaves PYTORCH_CUDA_ALLOC_CONF, the rest stays.

    python3 tests/python/test_ipc_env.py        (also run by the C++ unit tests)
"""

import os
import sys
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir, os.pardir))
sys.path.insert(0, os.path.join(ROOT, "python"))

from kforge_worker import sandbox  # noqa: E402


class LegacyCudaIpcEnv(unittest.TestCase):
    def test_removes_only_expandable_segments(self):
        env = {"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:128,expandable_segments:True,garbage_collection_threshold:0.6"}
        self.assertEqual(sandbox.legacy_cuda_ipc_env(env), ["expandable_segments:True"])
        self.assertEqual(env["PYTORCH_CUDA_ALLOC_CONF"], "max_split_size_mb:128,garbage_collection_threshold:0.6")

    def test_drops_the_variable_when_nothing_is_left(self):
        env = {"PYTORCH_CUDA_ALLOC_CONF": " expandable_segments:True", "OTHER": "1"}
        self.assertEqual(sandbox.legacy_cuda_ipc_env(env), [" expandable_segments:True"])
        self.assertEqual(env, {"OTHER": "1"})

    def test_leaves_other_settings_and_absence_alone(self):
        env = {"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:64"}
        self.assertEqual(sandbox.legacy_cuda_ipc_env(env), [])
        self.assertEqual(env, {"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:64"})
        empty = {}
        self.assertEqual(sandbox.legacy_cuda_ipc_env(empty), [])
        self.assertEqual(empty, {})

    def test_the_worker_applies_it_to_its_own_environment(self):
        import subprocess
        env = dict(os.environ, PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True")
        code = ("import runpy, sys, os; sys.argv = ['kforge_worker', 'scan', '--help'];\n"
                "import importlib; sys.path.insert(0, %r); m = importlib.import_module('kforge_worker.__main__');\n"
                "print(os.environ.get('PYTORCH_CUDA_ALLOC_CONF', '<unset>'))") % os.path.join(ROOT, "python")
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(out.stdout.strip().splitlines()[-1], "<unset>", out.stderr)


if __name__ == "__main__":
    unittest.main()
