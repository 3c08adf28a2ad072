"""Bundled families about lists, and greedy algorithms."""

from __future__ import annotations

from envs.code.bundled.spec import Family, ints

__all__ = ["LIST_FAMILIES"]

ROTATE = Family(
    name="rotate_left",
    topic="lists",
    function="rotate_left",
    args=(("items", "ints"),),
    result="ints",
    doc="returns `items` rotated left by $k positions (the first element moves to the end, $k times); "
    "an empty list stays empty",
    source="""
def rotate_left(items):
    if not items:
        return []
    shift = $k % len(items)
    return items[shift:] + items[:shift]
""",
    variants=[{"k": k} for k in (1, 2, 3, 4, 5, 7, 10, 13)],
    make_args=lambda rng, p: (ints(rng, 1, 12, -50, 50),),
    edge_cases=lambda p: [([],), ([7],)],
)

WINDOW_SUMS = Family(
    name="window_sums",
    topic="lists",
    function="window_sums",
    args=(("items", "ints"),),
    result="ints",
    doc="returns the sums of every block of $k consecutive elements of `items`, from left to right "
    "(an empty list if `items` has fewer than $k elements)",
    source="""
def window_sums(items):
    return [sum(items[i:i + $k]) for i in range(len(items) - $k + 1)]
""",
    variants=[{"k": k} for k in range(1, 9)],
    make_args=lambda rng, p: (ints(rng, 0, 14, -20, 40),),
)

KTH_LARGEST = Family(
    name="kth_largest_distinct",
    topic="lists",
    function="kth_largest",
    args=(("items", "ints"),),
    result="int",
    doc="returns the $k-th largest distinct value of `items` (rank 1 is the maximum; equal values count "
    "once), or -1 if there are fewer than $k distinct values",
    source="""
def kth_largest(items):
    values = sorted(set(items), reverse=True)
    return values[$k - 1] if len(values) >= $k else -1
""",
    variants=[{"k": k} for k in range(1, 9)],
    make_args=lambda rng, p: (ints(rng, 0, 15, 0, 12),),
)

PAIR_SUM = Family(
    name="count_pairs_with_sum",
    topic="lists",
    function="count_pairs",
    args=(("items", "ints"),),
    result="int",
    doc="returns the number of index pairs i < j with items[i] + items[j] == $t",
    source="""
def count_pairs(items):
    seen = {}
    count = 0
    for x in items:
        count += seen.get($t - x, 0)
        seen[x] = seen.get(x, 0) + 1
    return count
""",
    variants=[{"t": t} for t in (0, 5, 10, -3, 7, 12, 1, 20)],
    make_args=lambda rng, p: (ints(rng, 0, 16, -5, 15),),
)

KEEP_K = Family(
    name="keep_at_most_k",
    topic="lists",
    function="keep_at_most",
    args=(("items", "ints"),),
    result="ints",
    doc="returns `items` with only the first $k occurrences of each value kept, in the original order",
    source="""
def keep_at_most(items):
    counts = {}
    kept = []
    for x in items:
        counts[x] = counts.get(x, 0) + 1
        if counts[x] <= $k:
            kept.append(x)
    return kept
""",
    variants=[{"k": k} for k in range(1, 9)],
    make_args=lambda rng, p: (ints(rng, 0, 20, 0, 4),),
)

INCREASING_RUN = Family(
    name="longest_gentle_climb",
    topic="lists",
    function="gentle_climb",
    args=(("items", "ints"),),
    result="int",
    doc="returns the length of the longest block of consecutive elements of `items` in which each "
    "element exceeds the previous one by at least 1 and at most $d (a single element is such a "
    "block; 0 for an empty list)",
    source="""
def gentle_climb(items):
    if not items:
        return 0
    best = current = 1
    for prev, cur in zip(items, items[1:]):
        if 1 <= cur - prev <= $d:
            current += 1
        else:
            current = 1
        best = max(best, current)
    return best
""",
    variants=[{"d": d} for d in (1, 2, 3, 4, 5, 6, 8, 10)],
    make_args=lambda rng, p: (ints(rng, 1, 15, 0, 12),),
    edge_cases=lambda p: [([],), (list(range(0, 40, 2)),)],
)

MAX_WINDOW = Family(
    name="max_window_sum",
    topic="lists",
    function="max_window_sum",
    args=(("items", "ints"),),
    result="int",
    doc="returns the largest sum of $k consecutive elements of `items`, or 0 if `items` has fewer than $k elements",
    source="""
def max_window_sum(items):
    if len(items) < $k:
        return 0
    window = sum(items[:$k])
    best = window
    for i in range($k, len(items)):
        window += items[i] - items[i - $k]
        best = max(best, window)
    return best
""",
    variants=[{"k": k} for k in range(1, 9)],
    make_args=lambda rng, p: (ints(rng, 0, 16, -30, 30),),
)

LEADERS = Family(
    name="local_leaders",
    topic="lists",
    function="leaders",
    args=(("items", "ints"),),
    result="ints",
    doc="returns, in order, the elements of `items` that are strictly greater than each of the (up to) "
    "$k elements that follow them",
    source="""
def leaders(items):
    return [x for i, x in enumerate(items) if all(x > y for y in items[i + 1:i + 1 + $k])]
""",
    variants=[{"k": k} for k in range(1, 9)],
    make_args=lambda rng, p: (ints(rng, 0, 14, 0, 20),),
)

CHUNK_SUMS = Family(
    name="chunk_maxima",
    topic="lists",
    function="chunk_maxima",
    args=(("items", "ints"),),
    result="ints",
    doc="splits `items` into consecutive chunks of $k elements (the last chunk may be shorter) and "
    "returns the maximum of each chunk",
    source="""
def chunk_maxima(items):
    return [max(items[i:i + $k]) for i in range(0, len(items), $k)]
""",
    variants=[{"k": k} for k in range(1, 9)],
    make_args=lambda rng, p: (ints(rng, 0, 17, -9, 9),),
)

JUMPS = Family(
    name="min_jumps_capped",
    topic="greedy",
    function="min_jumps",
    args=(("items", "ints"),),
    result="int",
    doc="you start on index 0 of `items`; from index i you may jump forward by 1 to min(items[i], $cap) "
    "positions. Return the least number of jumps that reaches the last index (0 if `items` has one "
    "element), or -1 if it cannot be reached",
    source="""
def min_jumps(items):
    last = len(items) - 1
    jumps = 0
    reach = end = 0
    for i in range(last):
        if i > reach:
            return -1
        reach = max(reach, i + min(items[i], $cap))
        if i == end:
            if reach <= i:
                return -1
            jumps += 1
            end = reach
            if end >= last:
                return jumps
    return jumps if end >= last else -1
""",
    variants=[{"cap": c} for c in (1, 2, 3, 4, 5, 6, 8, 100)],
    make_args=lambda rng, p: (ints(rng, 1, 14, 0, 5),),
    edge_cases=lambda p: [([0],), ([1, 0, 3],)],
)

COOKIES = Family(
    name="assign_cookies_tolerant",
    topic="greedy",
    function="satisfied",
    args=(("greed", "ints"), ("sizes", "ints")),
    result="int",
    doc="each child i wants a cookie of size at least greed[i] - $slack; each cookie (sizes) goes to at "
    "most one child and each child gets at most one cookie. Return the largest number of children who "
    "can get a cookie they accept",
    source="""
def satisfied(greed, sizes):
    need = sorted(g - $slack for g in greed)
    have = sorted(sizes)
    count = 0
    for size in have:
        if count < len(need) and size >= need[count]:
            count += 1
    return count
""",
    variants=[{"slack": s} for s in range(8)],
    make_args=lambda rng, p: (ints(rng, 1, 9, 1, 15), ints(rng, 1, 9, 1, 12)),
)

BOATS = Family(
    name="min_boats",
    topic="greedy",
    function="min_boats",
    args=(("weights", "ints"),),
    result="int",
    doc="every person in `weights` (each at most $limit) needs a seat in a boat; a boat carries at most two "
    "people whose total weight is at most $limit. Return the least number of boats",
    source="""
def min_boats(weights):
    w = sorted(weights)
    i, j = 0, len(w) - 1
    boats = 0
    while i <= j:
        if i < j and w[i] + w[j] <= $limit:
            i += 1
        j -= 1
        boats += 1
    return boats
""",
    variants=[{"limit": x} for x in (5, 8, 10, 12, 15, 20, 25, 30)],
    make_args=lambda rng, p: (ints(rng, 0, 12, 1, p["limit"]),),
)

INTERVALS = Family(
    name="spaced_meetings",
    topic="greedy",
    function="max_meetings",
    args=(("starts", "ints"), ("lengths", "ints")),
    result="int",
    doc="meeting i runs from starts[i] to starts[i] + lengths[i] (the lists have equal length). Choose "
    "as many meetings as possible so that each chosen meeting starts at least $gap time units after the "
    "previous chosen one ends; return that number",
    source="""
def max_meetings(starts, lengths):
    meetings = sorted(zip(starts, lengths), key=lambda m: m[0] + m[1])
    count = 0
    free_at = None
    for start, length in meetings:
        if free_at is None or start >= free_at:
            count += 1
            free_at = start + length + $gap
    return count
""",
    variants=[{"gap": g} for g in range(8)],
    make_args=lambda rng, p: (lambda n: (ints(rng, n, n, 0, 30), ints(rng, n, n, 1, 8)))(rng.randint(0, 10)),
)

LIST_FAMILIES = [
    ROTATE, WINDOW_SUMS, KTH_LARGEST, PAIR_SUM, KEEP_K, INCREASING_RUN, MAX_WINDOW, LEADERS, CHUNK_SUMS,
    JUMPS, COOKIES, BOATS, INTERVALS,
]  # fmt: skip
