#!/usr/bin/env python3
"""Self-test of check_layers.py: small doctored trees in a temporary folder, run through the
script as ctest runs it, prove that a clean tree passes and that an upward arrow, a cycle
(within a folder and across layers), a misplaced file and a public header that includes src/
each fail with their own line, as does an include against the rules between node/'s
sub-folders or a cohortctl file that uses node/ beyond node/status/.
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
    "src/node/work/task.h": '#include "store/store.h"\n',
    "src/node/work/task.c": '#include "task.h"\n#include "not_in_tree.h"\n',
    "src/node/service.h": '#include "node/work/task.h"\n#include "cohort/handler.h"\n',
    "src/node/service.c": '#include "node/service.h"\n  #  include "core/log.h"\n',
    "src/cli/cohortd.c": '#include "node/service.h"\n#include "core/log.h"\n',
    "src/node/status/view.h": '#include "store/store.h"\n',
    "src/cli/ctl_view.c": '#include "node/status/view.h"\n',
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
        self.assertIn("layers: clean (8 modules", out)
        self.assertIn("node    3 modules: service status/view work/task", out)
        self.assertIn("uses: core (1), store (2)", out)
        self.assertIn('"not_in_tree.h" is not under src/ or include/', out)
        self.assertNotIn("UPWARD", out)
        self.assertNotIn("CYCLE", out)

    def test_a_pure_store_module_may_include_only_pure_ones(self):
        pure = {"src/store/doc.h": "", "src/store/runs.h": '#include "store/doc.h"\n',
                "src/store/runs.c": '#include "store/runs.h"\n#include "core/log.h"\n'}
        status, out = run({**CLEAN, **pure})
        self.assertEqual(status, 0, out)
        self.fails({**pure,
                    "src/store/runs.c": '#include "store/runs.h"\n#include "store/store.h"\n'},
                   "RULE store/runs -> store/store: store/runs is pure document shaping "
                   "(STORE_PURE): it must not include store/store, which calls the database "
                   "(src/store/runs.c:2)",
                   "1 broken folder rule(s)")

    def test_an_upward_arrow_fails_naming_the_file_and_line(self):
        self.fails({"src/core/clock.h": '\n#include "node/work/task.h"\n'},
                   "UPWARD core/clock -> node/work/task: layer core must not include layer node "
                   "(src/core/clock.h:2)",
                   "1 upward arrow(s)")

    def test_a_cycle_within_a_folder_fails_with_each_step(self):
        out = self.fails({"src/node/work/task.c":
                          '#include "node/work/task.h"\n#include "node/service.h"\n'},
                         "CYCLE among node/service, node/work/task:",
                         "node/service -> node/work/task -> node/service",
                         "node/work/task -> node/service (src/node/work/task.c:2)")
        self.assertNotIn("UPWARD", out)

    def test_a_cycle_through_a_relative_include_is_found(self):
        self.fails({"src/node/work/task.h": '#include "../service.h"\n'},
                   "node/work/task -> node/service (src/node/work/task.h:1)")

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

    def test_a_sub_folder_of_node_that_breaks_its_rule_fails(self):
        self.fails({"src/node/work/task.c": '#include "node/http/api.h"\n',
                    "src/node/http/api.h": ""},
                   "RULE node/work/task -> node/http/api: node/work/ must not include node/http/ "
                   "(src/node/work/task.c:1)",
                   "1 broken folder rule(s)")

    def test_the_read_models_stand_on_core_and_store_alone(self):
        self.fails({"src/node/status/view.h": '#include "node/service.h"\n'},
                   "RULE node/status/view -> node/service: node/status/ must not include node/")

    def test_cohortctl_uses_only_the_read_models_of_node(self):
        self.fails({"src/cli/ctl_view.c": '#include "node/work/task.h"\n'},
                   "RULE cli/ctl_view -> node/work/task: cohortctl uses only node/status/ of node/")

    def test_an_unknown_sub_folder_of_node_is_misplaced(self):
        self.fails({"src/node/misc/thing.c": "", "src/store/deep/x.c": ""},
                   "MISPLACED src/node/misc/thing.c: 'node/misc' is not a folder of node/",
                   "MISPLACED src/store/deep/x.c: layer 'store' has no sub-folders")


if __name__ == "__main__":
    unittest.main(verbosity=2)
