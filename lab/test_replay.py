"""Unit tests of the recording path's parts that need no browser (run by .ci/run): cutting a
recording into aimed movements, retargeting one onto a control, which movement fits, plans of
every layout against its page, the jobs (folds by person and typist, swaps), key schedules and
touch gestures. tests/it/replay.rs runs the whole path in a real browser."""

import json
import math
import random
import re
import unittest
from pathlib import Path

from replay import play, record, sources, touch
from replay.sources import MOVE, PRESS, RELEASE, PointerPerson, Segment, Typist

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def approach(t0, x0, y0, x1, y1, steps=10, dt=16):
    return [(t0 + k * dt, MOVE, x0 + (x1 - x0) * k / steps, y0 + (y1 - y0) * k / steps) for k in range(steps + 1)]


class SegmentTest(unittest.TestCase):
    def test_a_recording_is_cut_into_click_approaches_and_drags_are_not_clicks(self):
        rows = approach(1000, 0, 0, 300, 0)
        rows += [(1200, PRESS, 300, 0), (1290, RELEASE, 300, 0)]
        rows += approach(1800, 300, 0, 300, 200)
        rows += [(2000, PRESS, 300, 200), (2010, MOVE, 340, 200), (2100, RELEASE, 340, 200)]  # a drag
        rows += approach(2500, 340, 200, 100, 100)
        rows += [(2700, PRESS, 100, 100), (2760, RELEASE, 100, 100)]
        segments = sources.segments_of(rows)
        self.assertEqual(len(segments), 2, "the drag is not a click")
        first, second = segments
        self.assertAlmostEqual(first.chord, 300.0)
        self.assertEqual(first.points[0][0], 0.0, "times start at the first move")
        self.assertEqual(first.press_ms, 200.0)
        self.assertEqual(first.dwell_ms, 90.0)
        self.assertEqual(second.pause_ms, 400.0, "from the drag's release to the first move")
        self.assertEqual(second.dwell_ms, 60.0)

    def test_a_long_wander_is_cut_at_a_pause_and_long_pauses_are_capped(self):
        rows = approach(0, 0, 0, 50, 0, steps=5)
        rows += approach(20_000, 50, 0, 400, 0, steps=50, dt=100)  # 5 s of slow moves, after a 20 s pause
        rows += [(25_100, PRESS, 400, 0), (25_180, RELEASE, 400, 0)]
        (segment,) = sources.segments_of(rows)
        self.assertLessEqual(segment.press_ms, sources.MAX_APPROACH_MS)
        self.assertEqual(segment.points[0][1:], (50.0, 0.0), "cut at the 20 s pause")
        self.assertEqual(segment.pause_ms, sources.MAX_PAUSE_MS)

    def test_wheel_notches_break_an_approach_and_make_bursts(self):
        rows = approach(0, 0, 0, 100, 0)
        rows += [(200, "wheel-down", 100, 0), (260, "wheel-down", 100, 0), (330, "wheel-down", 100, 0)]
        rows += approach(900, 100, 0, 100, 300)
        rows += [(1100, PRESS, 100, 300), (1170, RELEASE, 100, 300)]
        (segment,) = sources.segments_of(rows)
        self.assertAlmostEqual(segment.chord, 300.0, msg="only the moves after the wheel")
        (burst,) = sources.wheel_bursts(rows)
        self.assertEqual(burst.gaps_ms, [60, 70])


class RetargetTest(unittest.TestCase):
    def test_the_stroke_lands_on_the_aim_with_its_shape_and_timing_kept(self):
        points = [(0.0, 10.0, 10.0), (16.0, 40.0, 30.0), (40.0, 90.0, 20.0), (70.0, 110.0, 10.0)]
        segment = Segment(300.0, points, 80.0, 70.0, 0)
        moved = play.retarget(segment, (500.0, 500.0), (500.0, 300.0))
        self.assertEqual([p[0] for p in moved], [p[0] for p in points])
        self.assertAlmostEqual(moved[0][1], 500.0)
        self.assertAlmostEqual(moved[-1][1], 500.0)
        self.assertAlmostEqual(moved[-1][2], 300.0)
        # A similarity transform: every distance scaled by the same factor (200 / 100).
        for (a, b) in ((0, 1), (1, 2), (0, 2)):
            before = math.dist(points[a][1:], points[b][1:])
            after = math.dist(moved[a][1:], moved[b][1:])
            self.assertAlmostEqual(after, 2.0 * before, places=6)

    def test_the_movement_that_fits_the_distance_is_taken_and_used_up(self):
        def segment(chord, order):
            return Segment(100.0, [(0.0, 0.0, 0.0), (50.0, chord / 2, 0.0), (100.0, chord, 0.0)], 100.0, 80.0, order)

        person = PointerPerson("t", "t/p", "train", "browser-mouse",
                               [segment(c, i) for i, c in enumerate([400, 30, 800, 120, 25])])
        taken, scale = person.take(110)
        self.assertEqual(taken.order, 3)
        self.assertAlmostEqual(scale, 110 / 120)
        taken, _ = person.take(110)
        self.assertEqual(taken.order, 0, "the next best in ratio once the best is used (400 over 30)")
        taken, _ = person.take(24)
        self.assertEqual(taken.order, 4)
        self.assertEqual(person.remaining(), 2)
        block = person.block(1, 2)
        self.assertEqual([s.order for s in block.segments], [2, 3, 4, 0, 1], "its own share first (the second of two shares of five: from 2)")


class LayoutTest(unittest.TestCase):
    def page(self, layout: str) -> str:
        if layout == "demo":
            return (REPO / "src" / "http" / "demo.html").read_text()
        html = (HERE / "survey" / f"{layout}.html").read_text()
        if layout == "grid":  # its rows are written by the page's script: 10 and 8 statements
            names = [f'name="q1_{i}"' for i in range(1, 11)] + [f'name="q2_{i}"' for i in range(1, 9)]
            html += "".join(f'<input type=radio {n} value="{v}">' for n in names for v in range(1, 6))
        return html

    def test_every_plan_names_controls_its_page_has(self):
        for layout in play.LAYOUTS["layouts"]:
            html = self.page(layout)
            for seed in range(20):
                for actions in play.draw_plan(layout, random.Random(seed)):
                    for action in actions:
                        selector = action["selector"]
                        if selector.startswith("#"):
                            self.assertIn(f'id="{selector[1:]}"', html, (layout, selector))
                        else:
                            name, value = re.match(r'input\[name="([^"]+)"\]\[value="([^"]+)"\]', selector).groups()
                            self.assertTrue(re.search(rf'name="?{name}"?[^>]*value="?{value}"?', html),
                                            (layout, selector))

    def test_each_page_ends_in_a_button_and_the_last_submits(self):
        for layout, spec in play.LAYOUTS["layouts"].items():
            for steps in spec["pages"]:
                self.assertEqual(steps[-1]["kind"], "button", layout)
            self.assertEqual(spec["pages"][-1][-1]["selector"], "#submit", layout)


def fixture_people():
    people = []
    for index in range(20):
        split = "holdout" if index % 4 == 1 else "train"
        people.append(PointerPerson("sapimouse", f"sapimouse/user{index}", split, "browser-mouse",
                                    [Segment(100.0, [(0.0, 0.0, 0.0), (100.0, 200.0, 0.0)], 100.0, 80.0, k)
                                     for k in range(60)]))
    typists = [Typist("cmu-keystroke", f"cmu-keystroke/s{k:03d}", "train" if k % 4 else "holdout", [[(0.0, 90.0, "char")]])
               for k in range(40)]
    typists += [Typist("aalto-136m", f"aalto-136m/{k}", "holdout", [[(0.0, 90.0, "char")]]) for k in range(10)]
    return people, typists


class JobsTest(unittest.TestCase):
    def test_a_train_person_types_with_a_typist_of_their_own_fold(self):
        people, typists = fixture_people()
        by_name = {t.name: t for t in typists}
        jobs = record.plan_jobs(people, typists)
        for job in jobs:
            if job.split == "train" and job.typist:
                self.assertEqual(by_name[job.typist].fold, sources.fold_of(job.person), job)
                self.assertEqual(by_name[job.typist].split, "train")
            if job.typist:
                self.assertEqual(by_name[job.typist].split, job.split)
        self.assertEqual(len({job.reference for job in jobs}), len(jobs), "references are unique")

    def test_swaps_repeat_their_original_with_the_other_typing_source(self):
        people, typists = fixture_people()
        by_name = {t.name: t for t in typists}
        jobs = record.plan_jobs(people, typists)
        originals = {job.reference: job for job in jobs}
        swaps = [job for job in jobs if job.swap_of]
        self.assertTrue(swaps)
        for swap in swaps:
            original = originals[swap.swap_of]
            self.assertEqual((swap.draws, swap.block, swap.layout, swap.person),
                             (original.draws, original.block, original.layout, original.person))
            self.assertNotEqual(by_name[swap.typist].set, by_name[original.typist].set)
        self.assertTrue(any(job.mode == "keyboard" for job in jobs))
        self.assertTrue(any(job.hand == "twin" for job in jobs))


class FakeDisplay:
    def __init__(self):
        self.calls = []

    def key(self, name, down):
        self.calls.append((name, down))

    def pointer(self):
        return (0, 0)


class KeysTest(unittest.TestCase):
    def test_recorded_keys_are_pressed_in_time_order_and_never_twice_at_once(self):
        runner = play.Runner(FakeDisplay(), None, "probe", play.TwinHand(), random.Random(1))
        keys = [(0.0, 120.0, "modifier"), (40.0, 100.0, "char"), (90.0, 150.0, "char"), (160.0, 200.0, "tab"),
                (210.0, 260.0, "enter"), (270.0, 300.0, "space"), (310.0, 330.0, "backspace")]
        pressed = runner.keys(keys, single_line=True)
        self.assertEqual(pressed, "mccsb", "Tab and (in a one-line field) Enter are left out")
        calls = runner.display.calls
        downs = [name for name, down in calls if down]
        self.assertEqual(downs[0], "Shift_L")
        self.assertNotEqual(downs[1], downs[2], "overlapping letters are two keys")
        self.assertNotIn("Tab", downs)
        self.assertNotIn("Return", downs)
        held = set()
        for name, down in calls:
            if down:
                self.assertNotIn(name, held)
                held.add(name)
            else:
                held.discard(name)
        self.assertEqual(held, set(), "everything is released")

    def test_a_twin_types_the_classes_of_its_person_at_a_metronome(self):
        twin = play.TwinHand(answers=["ccsdm"])
        keys = twin.answer("short")
        self.assertEqual([k[2] for k in keys], ["char", "char", "space", "digit", "modifier"])
        gaps = {round(b[0] - a[0], 6) for a, b in zip(keys, keys[1:])}
        self.assertEqual(gaps, {180.0})


class TouchTest(unittest.TestCase):
    def test_taps_and_swipes_are_told_apart_in_css_pixels(self):
        class Recording:
            rows = [
                (1000, "down", 300, 600, 1.0, 0.2, 0), (1030, "move", 306, 603, 1.0, 0.2, 0),
                (1080, "up", 306, 603, 1.0, 0.2, 0),
                (1500, "down", 300, 1500, 1.0, 0.25, 0), (1600, "move", 300, 1200, 1.0, 0.25, 0),
                (1700, "move", 300, 900, 1.0, 0.25, 0), (1750, "up", 300, 900, 1.0, 0.25, 0),
                (1760, "down", 10, 10, 1.0, 0.2, 1),  # a second finger: not replayed
            ]

        taps, swipes = touch.gestures(Recording())
        self.assertEqual(taps, [[80, round(0.2 * touch.RADIUS_PER_SIZE, 2), 1.0, 1000.0]])
        (swipe,) = swipes
        self.assertEqual(swipe["pause"], 420)
        self.assertEqual(swipe["points"][-1], [250, 0.0, -200.0])


if __name__ == "__main__":
    unittest.main()
