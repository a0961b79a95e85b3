"""The people of the recordings, replayed: which sessions to record and the workers that record
them, each on a display of its own (one cursor each).

Every session is one survey layout filled by one person's hand (sources.PointerPerson for the
pointer, sources.Typist for the keys), through XTEST into a headed Chromium (session.py). What is
recorded (`plan_jobs`):

- each SapiMouse person fills one desktop layout (demo, grid, text in turn, by the person's
  place in the name order), as a respondent fills one survey; Balabit's ten people, who recorded
  far more than a survey needs, fill each of them. One layout per person plans 257 sessions
  (about two hours at the two a minute measured with three workers on two cores) where three
  layouts each planned 556 (four and a half);
- every `KEYBOARD_EVERY`-th TRAIN person and every other HOLDOUT one also fill one layout by
  keyboard alone (Tab, Shift+Tab, Space, arrows, Enter at the typist's own key timing, the
  person's own pauses);
- HOLDOUT sessions of the text layout (the one that is mostly typing) are recorded again with the
  typist swapped for one of the other typing source (CMU for Aalto and back): the same
  movements, plan and draws, other keys;
- a person's typist is of the person's split, and in TRAIN of the person's cross-validation
  fold, so that grouping the folds by person also groups them by typist; in both splits a
  person's sessions alternate between CMU's password typists and Aalto's sentence typists;
- `TwinHand` twins of some people's sessions are automation injected at the OS level (family
  `xtest-minjerk`): the same plan, window and page, straight minimum-jerk paths, metronome keys.

A session's reference is a UUID derived from what it is, so a rerun records the same sessions.
"""

from __future__ import annotations

import copy
import random
import time
import traceback
import uuid
from dataclasses import dataclass, field

from . import browser, play, session
from .sources import PointerPerson, Typist
from .xinput import Display

DESKTOP_LAYOUTS = ("demo", "grid", "text")
KEYBOARD_EVERY = 4
TWIN_EVERY = 3


def reference_for(key: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "telltale-replay/" + key))


@dataclass
class Job:
    key: str  # what the session is; its reference and every draw derive from it
    split: str
    person: str  # the pointer person (or the keyboard person's pauses)
    typist: str | None
    layout: str
    mode: str  # "mouse" | "keyboard"
    hand: str = "person"  # "person" | "twin"
    swap_of: str | None = None  # the reference of the session this one repeats with another typist
    draws: str = ""  # the seed of the plan, window and aim draws (a swap shares its original's)
    block: tuple = (0, 1)  # which share of the person's movements it replays (a swap its original's)

    @property
    def reference(self) -> str:
        return reference_for(self.key)

    def attempt_reference(self, attempt: int) -> str:
        """A session tried again gets a reference of its own: the failed attempt's events stay
        under the first one, unlabelled (never trained on or evaluated)."""
        return self.reference if attempt == 0 else reference_for(f"{self.key}#attempt{attempt}")

    def label(self, person: PointerPerson, typist: Typist | None, outcome: play.Outcome, seconds: float,
              window: browser.Window) -> dict:
        late = sorted(outcome.late_ms)
        common = {"reference": self.reference, "split": self.split, "layout": self.layout, "mode": self.mode,
                  "path": "replay-xtest", "seconds": round(seconds, 1), "window": f"{window.width}x{window.height}",
                  "actions": outcome.actions, "keys": outcome.keys, "typed": outcome.typed,
                  "schedule_late_p99_ms": round(late[int(0.99 * (len(late) - 1))], 2) if late else 0.0}
        if self.hand == "twin":
            return {**common, "class": "bot", "generator": "xtest-minjerk", "family": "xtest-minjerk",
                    "factors": {"path": "xtest-minjerk", "driver": "xtest", "modality": self.mode},
                    "seed": None, "device": "xvfb-chromium", "cluster": f"twin/{person.name}",
                    "source": "lab/replay (TwinHand)"}
        return {**common, "class": "human", "generator": "human", "seed": None, "device": person.device,
                "cluster": person.name, "person": person.name, "typist": typist.name if typist else None,
                "typing": typist.set if typist else "none", "fold": person.fold,
                "source": f"{person.set}:{person.name} + {typist.name if typist else 'no typing'}",
                "variant": "replay" if self.swap_of is None else f"swap-{typist.set if typist else 'none'}",
                "base": self.swap_of or self.reference}


def typist_for(person: PointerPerson, typists: list[Typist], kind: str | None, index: int) -> Typist | None:
    """A typist of the person's split (and in TRAIN of the person's fold), of `kind` when given,
    chosen by the person and the session's index."""
    pool = [t for t in typists if t.split == person.split and (kind is None or t.set == kind)]
    if person.split == "train":
        pool = [t for t in pool if t.fold == person.fold] or pool
    if not pool:
        return None
    rng = random.Random(f"typist/{person.name}/{index}")
    return rng.choice(pool)


def plan_jobs(people: list[PointerPerson], typists: list[Typist], splits=("train", "holdout"),
              limit_people: int = 0) -> list[Job]:
    jobs: list[Job] = []
    holdout_kinds = ("cmu-keystroke", "aalto-136m")
    for number, person in enumerate(sorted(people, key=lambda p: p.name)):
        if person.split not in splits:
            continue
        if limit_people and number >= limit_people:
            break
        layouts = DESKTOP_LAYOUTS if person.set == "balabit" else (DESKTOP_LAYOUTS[number % 3],)
        index = 0
        for layout in layouts:
            index += 1
            # Both splits type both kinds of text (a password's repetitions, free sentences), so
            # that neither kind of typing can stand for "a person".
            kind = holdout_kinds[(number + index) % 2]
            typist = typist_for(person, typists, kind, index)
            key = f"{person.name}/{layout}/0"
            job = Job(key, person.split, person.name, typist.name if typist else None, layout, "mouse", draws=key)
            jobs.append(job)
            if person.split == "holdout" and layout == "text" and typist is not None:
                other = holdout_kinds[1 - holdout_kinds.index(typist.set)]
                swap = typist_for(person, typists, other, index)
                if swap is not None:
                    jobs.append(Job(key + "/swap", person.split, person.name, swap.name, layout, "mouse",
                                    swap_of=job.reference, draws=key))
            if layout == layouts[0] and number % TWIN_EVERY == 0:
                jobs.append(Job(key + "/twin", person.split, person.name, None, layout, "mouse", hand="twin",
                                draws=key))
        if number % (KEYBOARD_EVERY // 2 if person.split == "holdout" else KEYBOARD_EVERY) == 0:
            layout = ("demo", "grid", "text")[number // KEYBOARD_EVERY % 3]
            typist = typist_for(person, typists, None, 99)
            key = f"{person.name}/{layout}/keyboard"
            jobs.append(Job(key, person.split, person.name, typist.name if typist else None, layout, "keyboard",
                            draws=key))
    # Each session replays a block of its person's movements of its own (a swap or a twin its
    # original's), so sessions are independent of each other: any subset can be recorded, in any
    # order, on any worker, and a rerun records the same.
    originals: dict[str, list[Job]] = {}
    for job in jobs:
        if job.swap_of is None and job.hand == "person":
            originals.setdefault(job.person, []).append(job)
    blocks = {}
    for person_jobs in originals.values():
        for index, job in enumerate(person_jobs):
            blocks[job.draws] = (index, len(person_jobs))
    for job in jobs:
        job.block = blocks.get(job.draws, (0, 1))
    return jobs


# A replay whose inputs went out later than this (99th percentile of every scheduled move, press
# and key, ms) is not the person's timing any more: it is recorded again.
MAX_SCHEDULE_LATE_P99_MS = 15.0


@dataclass
class Recorder:
    """Records jobs in `workers` processes (no shared interpreter lock between the replays'
    schedules), each with a display and a page server of its own; `done(label)` is called in
    this process as each session is recorded (the pipeline appends it to its labels file).
    Originals are recorded first, then their swaps and twins (which type as many keys as their
    original did)."""

    telltale: str  # the Telltale server's base URL
    tracking: dict  # split -> tracking key
    people: dict  # name -> PointerPerson
    typists: dict  # name -> Typist
    wheel_donors: dict  # split -> PointerPerson with wheel bursts (for people who recorded none)
    workers: int = 3
    log: object = print
    done: object = None
    failures: list = field(default_factory=list)
    typed: dict = field(default_factory=dict)  # draws -> keys per answer of the original

    def run(self, jobs: list[Job]) -> int:
        first = [job for job in jobs if job.swap_of is None and job.hand == "person"]
        later = [job for job in jobs if not (job.swap_of is None and job.hand == "person")]
        recorded = self.run_phase(first, len(jobs), 0)
        return recorded + self.run_phase(later, len(jobs), recorded)

    def run_phase(self, jobs: list[Job], total: int, before: int) -> int:
        import multiprocessing

        if not jobs:
            return 0
        context = multiprocessing.get_context("fork")
        todo, results = context.Queue(), context.Queue()
        for job in jobs:
            todo.put(job)
        count = min(self.workers, len(jobs))
        for _ in range(count):
            todo.put(None)
        processes = [context.Process(target=self.worker, args=(todo, results), daemon=True) for _ in range(count)]
        for process in processes:
            process.start()
        started, recorded, finished = time.time(), 0, 0
        while finished < count:
            kind, payload = results.get()
            if kind == "exit":
                finished += 1
            elif kind == "log":
                self.log(payload)
            elif kind == "failure":
                self.failures.append(payload)
            elif kind == "label":
                recorded += 1
                self.typed[payload["draws"]] = payload.get("typed")
                if self.done:
                    self.done(payload)
                if (before + recorded) % 10 == 0:
                    self.log(f"replayed {before + recorded} of {total} sessions ({time.time() - started:.0f} s "
                             f"this phase, {len(self.failures)} failed)")
        for process in processes:
            process.join()
        return recorded

    def worker(self, todo, results) -> None:
        from .pages import PageServer

        display, server = None, None
        try:
            display = Display.start()
            server = PageServer(self.telltale)
            while True:
                job = todo.get()
                if job is None:
                    return
                label = self.record(display, server, job, lambda message: results.put(("log", message)),
                                    lambda failure: results.put(("failure", failure)))
                if label is not None:
                    results.put(("label", label))
        except Exception as error:  # noqa: BLE001 (a worker that cannot start says why)
            results.put(("log", f"a replay worker stopped: {error!r}"))
        finally:
            if server is not None:
                server.close()
            if display is not None:
                display.close()
            results.put(("exit", None))

    def record(self, display: Display, server, job: Job, log, fail) -> dict | None:
        person = self.people[job.person]
        typist = self.typists.get(job.typist) if job.typist else None
        for attempt in range(3):
            mine = person.block(*job.block)
            rng = random.Random(f"{job.draws}/runner")
            window = browser.draw_window(random.Random(f"{job.draws}/window"), (display.width, display.height))
            plan = play.draw_plan(job.layout, random.Random(f"{job.draws}/plan"))
            if job.hand == "twin":
                hand = play.TwinHand(answers=list(self.typed.get(job.draws) or []))
            else:
                own = copy.deepcopy(typist) if typist else None
                if own is not None:  # each session starts somewhere else in the typist's recordings
                    own.cursor = random.Random(f"{job.draws}/typist").randrange(len(own.runs))
                hand = play.PersonHand(mine, own, random.Random(f"{job.draws}/hand"),
                                       keyboard_only=job.mode == "keyboard", wheel_donor=self.wheel_donors.get(job.split))
            started = time.time()
            try:
                outcome = session.record_session(display, server, self.tracking[job.split],
                                                 job.attempt_reference(attempt), job.layout, hand, rng, window, plan)
                late = sorted(outcome.late_ms)
                p99 = late[int(0.99 * (len(late) - 1))] if late else 0.0
                if p99 > MAX_SCHEDULE_LATE_P99_MS:
                    raise play.ReplayError(f"inputs went out late (p99 {p99:.1f} ms): the machine was too busy")
            except Exception as error:  # noqa: BLE001 (a failed session is logged and tried again)
                log(f"  {job.key} attempt {attempt + 1} failed: {error!r}")
                if attempt == 2:
                    fail({"key": job.key, "reference": job.reference, "error": repr(error),
                          "trace": traceback.format_exc(limit=4)})
                continue
            label = job.label(person, typist, outcome, time.time() - started, window)
            label.update(reference=job.attempt_reference(attempt), key=job.key, draws=job.draws, attempt=attempt + 1)
            return label
        return None
