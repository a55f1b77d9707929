#!/usr/bin/env python3
"""Self-test of check_layers.py: small doctored trees in a temporary folder, run through the
script as ctest runs it, prove that a clean tree passes and that an upward arrow, a cycle
(within a folder and across layers), a misplaced file and a public header that includes src/
each fail with their own line.
Python 3 standard library only.
"""

import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "check_layers.py")

# A tree that keeps the rule: each layer includes itself and those below; node/ has an
# include chain without a cycle, one include relative to its own folder and one of the
# public ABI; a system header written with quotes is only a note.
CLEAN = {
    "include/cohort/handler.h": "",
    "src/core/log.h": '#include "cohort/handler.h"\n',
    "src/core/log.c": '#include "core/log.h"\n#include <stdio.h>\n',
    "src/core/clock.h": "",
    "src/core/clock.c": '#include "core/clock.h"\n#include "core/log.h"\n',
    "src/store/store.h": '#include "core/clock.h"\n',
    "src/store/store.c": '#include "store/store.h"\n#include "core/log.h"\n',
    "src/node/task.h": '#include "store/store.h"\n',
    "src/node/task.c": '#include "task.h"\n#include "not_in_tree.h"\n',
    "src/node/service.h": '#include "node/task.h"\n#include "cohort/handler.h"\n',
    "src/node/service.c": '#include "node/service.h"\n  #  include "core/log.h"\n',
    "src/cli/cohortd.c": '#include "node/service.h"\n#include "core/log.h"\n',
}


def run(files):
    with tempfile.TemporaryDirectory() as root:
        for rel, text in files.items():
            path = os.path.join(root, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        done = subprocess.run([sys.executable, SCRIPT, os.path.join(root, "src")],
                              capture_output=True, text=True, timeout=60)
        return done.returncode, done.stdout + done.stderr


class CheckLayers(unittest.TestCase):
    def fails(self, changes, *expected):
        """The clean tree with `changes` (path: text) fails, printing each expected line."""
        status, out = run({**CLEAN, **changes})
        self.assertEqual(status, 1, out)
        for line in expected:
            self.assertIn(line, out)
        return out

    def test_a_clean_tree_passes_and_prints_the_layers(self):
        status, out = run(CLEAN)
        self.assertEqual(status, 0, out)
        self.assertIn("layers: clean (6 modules", out)
        self.assertIn("node    2 modules: service task", out)
        self.assertIn("uses: core (1), store (1)", out)
        self.assertIn('"not_in_tree.h" is not under src/ or include/', out)
        self.assertNotIn("UPWARD", out)
        self.assertNotIn("CYCLE", out)

    def test_an_upward_arrow_fails_naming_the_file_and_line(self):
        self.fails({"src/core/clock.h": '\n#include "node/task.h"\n'},
                   "UPWARD core/clock -> node/task: layer core must not include layer node "
                   "(src/core/clock.h:2)",
                   "1 upward arrow(s)")

    def test_a_cycle_within_a_folder_fails_with_each_step(self):
        out = self.fails({"src/node/task.c": '#include "node/task.h"\n#include "node/service.h"\n'},
                         "CYCLE among node/service, node/task:",
                         "node/service -> node/task -> node/service",
                         "node/task -> node/service (src/node/task.c:2)")
        self.assertNotIn("UPWARD", out)

    def test_a_cycle_through_a_relative_include_is_found(self):
        self.fails({"src/node/task.h": '#include "service.h"\n'},
                   "node/task -> node/service (src/node/task.h:1)")

    def test_a_cycle_across_layers_is_both_a_cycle_and_an_upward_arrow(self):
        self.fails({"src/core/clock.c": '#include "core/clock.h"\n#include "store/store.h"\n'},
                   "UPWARD core/clock -> store/store",
                   "CYCLE among core/clock, store/store:")

    def test_a_public_header_including_src_fails(self):
        self.fails({"include/cohort/handler.h": '#include <stdint.h>\n#include "core/log.h"\n'},
                   "ABI include/cohort/handler.h:2 includes src/core/log.h",
                   "1 ABI include(s) of src/")

    def test_a_file_outside_the_layer_folders_fails(self):
        self.fails({"src/stray.c": "", "src/extra/thing.c": ""},
                   "MISPLACED src/stray.c: outside the layer folders",
                   "MISPLACED src/extra/thing.c: folder 'extra' is not a layer")


if __name__ == "__main__":
    unittest.main(verbosity=2)
