#!/usr/bin/env python3
"""A model of the cuda attention's split ring (tmpl_attention_wgmma.cpp, block_q 64 with warps 8):
one producer copying key/value tiles into 3 stages, two consumer warpgroups ("parts") taking the
tiles even and odd, mbarriers completing phases whose parity a wait tests, copies landing in any
order. Random schedules of it show why the template gives each part "landed" barriers of its own
per stage (slots, rounds of 6 tiles): with barriers per stage a part reads a stage before its tile
landed in some schedules (the 12-07 layer tune's NaN), and waiting first for the phase before
deadlocks (it hung on the GPU); with slots neither happens. The code's side of it (the slots, the
producer's arming, the rounds) is checked by CudaAttention.SplitKeyTilesLandOnBarriersOfTheirPart.
"""
import random
import unittest

STAGES, SPLIT = 3, 2


class Barrier:
    def __init__(self):
        self.phases = 0  # completed phases

    def passed(self, parity):
        # mbarrier.try_wait.parity: true once the phase of that parity completed, that is while
        # the current phase has the other parity (it cannot tell phases two apart).
        return (self.phases & 1) != parity


def run(tiles, scheme, rng):
    """One random schedule of `tiles` key tiles. scheme: "stage" (landed barriers per stage),
    "double" (the same, waiting first for the phase before), "slot" (per stage and part).
    Returns (deadlocked, reads of a stage not holding the awaited tile)."""
    slots = STAGES * SPLIT if scheme == "slot" else STAGES
    round_ = STAGES * SPLIT if scheme == "slot" else STAGES  # lcm(3, 2)
    slot = (lambda u: u % STAGES + STAGES * (u % SPLIT)) if scheme == "slot" else (
        lambda u: u % STAGES)
    landed = {kind: [Barrier() for _ in range(slots)] for kind in "kv"}
    free = [Barrier() for _ in range(STAGES)]
    holds = {kind: [None] * STAGES for kind in "kv"}  # the tile whose data a stage holds
    in_flight, issued, bad_reads = [], 0, []

    def part(p):
        mine = list(range(p, tiles, SPLIT))

        def wait(kind, u):
            parity = (u // round_) & 1
            if scheme == "double" and u >= STAGES:
                yield ("wait", landed[kind][slot(u)], parity ^ 1)
            yield ("wait", landed[kind][slot(u)], parity)
            if holds[kind][u % STAGES] != u:
                bad_reads.append((p, kind, u))

        # As the kernel: S(t) waits for K(t), then P V of the part's previous tile waits for its
        # values and hands its stage back; the last tile's values after the loop.
        for i, t in enumerate(mine):
            yield from wait("k", t)
            if i > 0:
                yield from wait("v", mine[i - 1])
                yield ("release", mine[i - 1] % STAGES)
        if mine:
            yield from wait("v", mine[-1])
            yield ("release", mine[-1] % STAGES)

    programs = [part(0), part(1)]
    step = [next(g, None) for g in programs]
    while True:
        moves = []
        if issued < tiles and (issued < STAGES or
                               free[issued % STAGES].passed((issued // STAGES - 1) & 1)):
            moves.append(("copy", None))
        moves += [("land", i) for i in range(len(in_flight))]
        moves += [("part", p) for p in range(2) if step[p] is not None and
                  (step[p][0] == "release" or step[p][1].passed(step[p][2]))]
        if not moves:
            finished = issued == tiles and all(s is None for s in step)
            return not finished, bad_reads
        what, i = rng.choice(moves)
        if what == "copy":
            for kind in "kv":
                holds[kind][issued % STAGES] = None  # being filled
                in_flight.append((kind, issued))
            issued += 1
        elif what == "land":
            kind, u = in_flight.pop(i)
            holds[kind][u % STAGES] = u
            landed[kind][slot(u)].phases += 1
        else:
            if step[i][0] == "release":
                free[step[i][1]].phases += 1
            step[i] = next(programs[i], None)


def outcomes(scheme, schedules=4000):
    rng = random.Random(7)
    deadlocks = races = 0
    for _ in range(schedules):
        deadlocked, bad = run(rng.choice([2, 3, 4, 5, 7, 8, 14, 16]), scheme, rng)
        deadlocks += deadlocked
        races += bool(bad)
    return deadlocks, races


class SplitRing(unittest.TestCase):
    def test_barriers_per_stage_let_a_part_read_a_stage_being_filled(self):
        self.assertGreater(outcomes("stage")[1], 0)

    def test_waiting_for_the_phase_before_deadlocks(self):
        self.assertGreater(outcomes("double")[0], 0)

    def test_slots_per_part_neither_race_nor_deadlock(self):
        self.assertEqual(outcomes("slot"), (0, 0))


if __name__ == "__main__":
    unittest.main()
