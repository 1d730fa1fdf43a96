"""Unit tests of the corpus's pure parts: normalisation, the case list, the
allow file and the comparison. Run: python3 -m unittest discover scripts/corpus"""

from __future__ import annotations

import io
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cases  # noqa: E402
import compare  # noqa: E402
import fixtures  # noqa: E402
from normalise import Context, blank_table_columns, drop_csv_columns, normalise  # noqa: E402

CTX = Context(scratch="/tmp/corpus-abcd1234", bin_dir="/work/before/target/debug", repo="/work/main",
              home="/tmp/corpus-abcd1234/home", hostname="node7")


class Normalise(unittest.TestCase):
    def n(self, text: str, **kw) -> str:
        return normalise(text, CTX, **kw)

    def test_paths_longest_first(self):
        self.assertEqual(self.n("/tmp/corpus-abcd1234/home/x /tmp/corpus-abcd1234/fx/a.yaml"),
                         "$HOME/x $TMP/fx/a.yaml")
        self.assertEqual(self.n("exec '/work/before/target/debug/train' sweep"), "exec '$BIN/train' sweep")
        self.assertEqual(self.n("/work/main/configs/t4.yaml"), "$REPO/configs/t4.yaml")

    def test_timestamps(self):
        self.assertEqual(self.n("time: 2026-11-22T11:34:32Z"), "time: <TIME>")
        self.assertEqual(self.n('"datetime_start":"2026-11-23T01:17:36.856573"'), '"datetime_start":"<TIME>"')
        self.assertEqual(self.n("2026-11-22T10:00:00.000Z,0,12"), "<TIME>,0,12")
        # A date alone is no timestamp.
        self.assertEqual(self.n("**Date:** 2025-01-18"), "**Date:** 2025-01-18")

    def test_durations(self):
        self.assertEqual(self.n("| LR: 0.003000 | Time: 95.32s | R²: 0.1"), "| LR: 0.003000 | Time: <T>s | R²: 0.1")
        self.assertEqual(self.n("2 epochs of 64 examples in 2.7 s; the"), "2 epochs of 64 examples in <T> s; the")
        self.assertEqual(self.n("it took 3.1 s"), "it took <T>")
        self.assertEqual(self.n("seconds: 0.61\ntime_s: 12\nseconds_before: 1e-3"),
                         "seconds: <T>\ntime_s: <T>\nseconds_before: <T>")
        self.assertEqual(self.n('{"seconds":1.2,"epochs":2}'), '{"seconds":<T>,"epochs":2}')
        # Other numbers stay.
        self.assertEqual(self.n("epochs: 3\nval_loss: 1.5"), "epochs: 3\nval_loss: 1.5")

    def test_pids_uuids_host_versions(self):
        self.assertEqual(self.n("its worker (pid 4242) has ended"), "its worker (pid <PID>) has ended")
        self.assertEqual(self.n('"worker":{"host":"node7","pid":20381,"start":153191}'),
                         '"worker":{"host":"<HOST>","pid":<PID>,"start":<START>}')
        self.assertEqual(self.n('"worker_id":"4fbd0e2a-92f4-4012-8ffe-1a7d30a4477a-20381"'), '"worker_id":"<UUID>"')
        self.assertEqual(self.n("host: node7\nnode7s node7.lan"), "host: <HOST>\nnode7s <HOST>.lan")
        self.assertEqual(self.n("memdiag 0.1.0\n"), "memdiag <VERSION>\n")
        self.assertEqual(self.n("train_version: 0.1.0\ntorch_version: 2.11.0"),
                         "train_version: <VERSION>\ntorch_version: 2.11.0")
        self.assertEqual(self.n('"train_version": "0.1.0",'), '"train_version": "<VERSION>",')

    def test_disk_free(self):
        self.assertEqual(self.n("runs: writable; 60903 MiB free, the run"), "runs: writable; <N> MiB free, the run")
        self.assertEqual(self.n("15360 MiB free of 15360"), "15360 MiB free of 15360")

    def test_csv_timing_columns_dropped(self):
        text = "epoch,train_loss,seconds,samples_per_s,r2\n1,2.5,0.05,1106.4,-0.6\n"
        self.assertEqual(drop_csv_columns(text), "epoch,train_loss,r2\n1,2.5,-0.6\n")
        plain = "config,target\na,\"b,c\"\n"
        self.assertEqual(drop_csv_columns(plain), plain)
        self.assertEqual(drop_csv_columns("not a header: seconds\n"), "not a header: seconds\n")

    def test_table_columns_blanked_whatever_their_width(self):
        def table(s: str) -> str:
            w = max(1, len(s))
            return ("┌───┬" + "─" * (w + 2) + "┐\n│ # ┆ " + "s".ljust(w) + " │\n╞═══╪" + "═" * (w + 2)
                    + "╡\n│ 0 ┆ " + s + " │\n└───┴" + "─" * (w + 2) + "┘\nafter")
        a, b = blank_table_columns(table("1.2"), {"s"}), blank_table_columns(table("12.3"), {"s"})
        self.assertEqual(a, b)
        self.assertIn("│ 0 ┆ <T> │", a)
        self.assertTrue(a.endswith("after"))

    def test_idempotent(self):
        text = "time: 2026-11-22T11:34:32Z in 3.2 s pid 7 /tmp/corpus-abcd1234/x"
        self.assertEqual(self.n(self.n(text)), self.n(text))


class Cases(unittest.TestCase):
    def test_ids_unique_and_safe(self):
        all_cases = cases.all_cases()
        ids = [c.id for c in all_cases]
        self.assertEqual(len(ids), len(set(ids)))
        for i in ids:
            self.assertRegex(i, r"^[A-Za-z0-9@+._-]+$")

    def test_size_and_tools(self):
        all_cases = cases.all_cases()
        self.assertTrue(250 <= len(all_cases) <= 400, len(all_cases))
        for c in all_cases:
            self.assertIn(c.argv[0], ("memdiag", "cfgcheck", "verify-fixes", "train"), c.id)

    def test_referenced_repo_files_exist(self):
        repo = Path(__file__).resolve().parents[2]
        for c in cases.all_cases():
            for w in c.argv[1:] + ([c.stdin] if c.stdin else []):
                if w.startswith(("configs/", "fuzz/")):
                    self.assertTrue((repo / w).exists(), f"{c.id}: {w}")

    def test_fixtures_write(self):
        repo = Path(__file__).resolve().parents[2]
        with tempfile.TemporaryDirectory() as d:
            fixtures.write(Path(d), repo)
            fx = Path(d)
            for c in cases.all_cases():
                for w in c.argv[1:]:
                    if w.startswith("{FX}/") and "/a-file/" not in w and "nonexistent" not in w:
                        self.assertTrue((fx / w[5:]).exists(), f"{c.id}: {w}")
            head = (fx / "data/train.safetensors").read_bytes()
            self.assertEqual(int.from_bytes(head[:8], "little") % 8, 0)


class Compare(unittest.TestCase):
    def test_parse_allow(self):
        allows = compare.parse_allow("# c\n\ntrain.sweep.op10.* unknown op_code   # why\n*:stderr README\n")
        self.assertEqual([(a.case, a.file, a.regex.pattern) for a in allows],
                         [("train.sweep.op10.*", "*", "unknown op_code"), ("*", "stderr", "README")])
        with self.assertRaises(ValueError):
            compare.parse_allow("lonely\n")
        with self.assertRaises(ValueError):
            compare.parse_allow("x (\n")

    def test_accepted_needs_every_changed_line(self):
        allows = compare.parse_allow("a.* ^-old\na.* ^\\+new\n")
        self.assertTrue(compare.accepted("a.b", "stdout", ["-old x", "+new y"], allows))
        self.assertFalse(compare.accepted("a.b", "stdout", ["-old x", "+other"], allows))
        self.assertFalse(compare.accepted("b.b", "stdout", ["-old x"], allows))

    def make(self, root: Path, cases_: dict[str, dict[str, str]]) -> Path:
        root.mkdir()
        (root / compare.MARKER).write_text("")
        for cid, files in cases_.items():
            for name, text in files.items():
                p = root / cid / name
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_text(text)
        return root

    def test_compare_trees(self):
        with tempfile.TemporaryDirectory() as d:
            a = self.make(Path(d) / "a", {"x": {"stdout": "1\n", "exit": "0\n"}, "y": {"stdout": "a\nb\n"},
                                          "z": {"files/m.csv": "k\n"}, "gone": {"exit": "0\n"}})
            b = self.make(Path(d) / "b", {"x": {"stdout": "1\n", "exit": "0\n"}, "y": {"stdout": "a\nc\n"},
                                          "z": {"files/m.csv": "k"}, "new": {"exit": "0\n"}})
            out = io.StringIO()
            r = compare.compare(a, b, [], 40, out=out)
            self.assertEqual(r["same"], ["x"])
            self.assertEqual(r["differ"], ["y", "z"])
            self.assertEqual((r["only_a"], r["only_b"]), (["gone"], ["new"]))
            self.assertIn("-b\n+c", out.getvalue())
            self.assertIn("<line endings differ>", out.getvalue())
            allows = compare.parse_allow("y:stdout ^[-+][bc]$\nz:files/* line\\ endings\nnew <only\\ in\\ B>\n")
            r = compare.compare(a, b, allows, 40, out=io.StringIO())
            self.assertEqual(r["allowed"], ["new", "y", "z"])
            self.assertEqual(r["differ"], [])
            self.assertTrue(all(x.used for x in allows))


if __name__ == "__main__":
    unittest.main()
