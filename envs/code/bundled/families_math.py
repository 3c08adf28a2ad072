"""Bundled families about arithmetic, dynamic programming and simulation."""

from __future__ import annotations

from envs.code.bundled.spec import Family, ints, lowercase

__all__ = ["MATH_FAMILIES"]

SUM_MULTIPLES = Family(
    name="sum_of_multiples",
    topic="math",
    function="sum_multiples",
    args=(("n", "int"),),
    result="int",
    doc="returns the sum of the positive integers below `n` that are divisible by $a or by $b (0 if there are none)",
    source="""
def sum_multiples(n):
    return sum(x for x in range(1, n) if x % $a == 0 or x % $b == 0)
""",
    variants=[{"a": a, "b": b} for a, b in ((3, 5), (2, 7), (4, 6), (5, 11), (3, 8), (6, 9), (7, 13), (2, 3))],
    make_args=lambda rng, p: (rng.randint(0, 500),),
    edge_cases=lambda p: [(1,), (p["a"] + 1,)],
)

DIGIT_POWERS = Family(
    name="digit_power_sum",
    topic="math",
    function="digit_power_sum",
    args=(("n", "int"),),
    result="int",
    doc="returns the sum of the decimal digits of the non-negative integer `n`, each raised to the power $p",
    source="""
def digit_power_sum(n):
    return sum(int(d) ** $p for d in str(n))
""",
    variants=[{"p": p} for p in range(1, 9)],
    make_args=lambda rng, p: (rng.randint(0, 10 ** rng.randint(1, 12)),),
    edge_cases=lambda p: [(0,)],
)

COLLATZ = Family(
    name="collatz_steps_to_threshold",
    topic="simulation",
    function="collatz_steps",
    args=(("n", "int"),),
    result="int",
    doc="starting from the positive integer `n`, repeatedly replace the value by half of it if it is even "
    "and by 3 times it plus 1 if it is odd; return the number of replacements made before the value is "
    "at most $t for the first time (0 if `n` is already at most $t)",
    source="""
def collatz_steps(n):
    steps = 0
    while n > $t:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps
""",
    variants=[{"t": t} for t in (1, 2, 4, 5, 10, 16, 50, 100)],
    make_args=lambda rng, p: (rng.randint(1, 5000),),
    edge_cases=lambda p: [(1,), (27,)],
)

PRIMES_MOD = Family(
    name="count_primes_in_class",
    topic="math",
    function="count_primes",
    args=(("n", "int"),),
    result="int",
    doc="returns how many primes p <= `n` satisfy p % $m == $r",
    source="""
def count_primes(n):
    if n < 2:
        return 0
    sieve = [True] * (n + 1)
    sieve[0] = sieve[1] = False
    for i in range(2, int(n ** 0.5) + 1):
        if sieve[i]:
            for j in range(i * i, n + 1, i):
                sieve[j] = False
    return sum(1 for p in range(n + 1) if sieve[p] and p % $m == $r)
""",
    variants=[{"m": m, "r": r} for m, r in ((4, 1), (4, 3), (6, 1), (6, 5), (10, 3), (10, 7), (3, 2), (8, 1))],
    make_args=lambda rng, p: (rng.randint(0, 3000),),
    edge_cases=lambda p: [(0,), (2,)],
)

BASE_CONVERT = Family(
    name="to_base",
    topic="math",
    function="to_base",
    args=(("n", "int"),),
    result="str",
    doc="returns the non-negative integer `n` written in base $b (digits 0-9, no prefix, '0' for zero)",
    source="""
def to_base(n):
    if n == 0:
        return "0"
    digits = []
    while n:
        digits.append(str(n % $b))
        n //= $b
    return "".join(reversed(digits))
""",
    variants=[{"b": b} for b in range(2, 10)],
    make_args=lambda rng, p: (rng.randint(0, 10**6),),
    edge_cases=lambda p: [(0,), (p["b"],)],
)

FIB_MOD = Family(
    name="fibonacci_mod",
    topic="dp",
    function="fib_mod",
    args=(("n", "int"),),
    result="int",
    doc="returns F(n) modulo $m, where F(0) = 0, F(1) = 1 and F(k) = F(k-1) + F(k-2)",
    source="""
def fib_mod(n):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, (a + b) % $m
    return a % $m
""",
    variants=[{"m": m} for m in (10, 97, 1000, 7, 1_000_000_007, 12, 2, 999)],
    make_args=lambda rng, p: (rng.randint(0, 3000),),
    edge_cases=lambda p: [(0,), (1,), (2,)],
)

PERFECT_POWER = Family(
    name="is_perfect_power",
    topic="math",
    function="is_power",
    args=(("n", "int"),),
    result="bool",
    doc="returns whether the non-negative integer `n` equals x ** $k for some non-negative integer x",
    source="""
def is_power(n):
    x = round(n ** (1 / $k))
    return any((x + d) ** $k == n for d in (-1, 0, 1) if x + d >= 0)
""",
    variants=[{"k": k} for k in range(2, 10)],
    make_args=lambda rng, p: (
        rng.choice([rng.randint(0, 10**6), rng.randint(0, 40) ** p["k"], rng.randint(2, 30) ** p["k"] + 1]),
    ),
    edge_cases=lambda p: [(0,), (1,), (2 ** p["k"],)],
)

DIVISORS_ABOVE = Family(
    name="divisors_above",
    topic="math",
    function="divisors_above",
    args=(("n", "int"),),
    result="int",
    doc="returns how many positive divisors of the positive integer `n` are greater than $k",
    source="""
def divisors_above(n):
    return sum(1 for d in range(1, n + 1) if n % d == 0 and d > $k)
""",
    variants=[{"k": k} for k in (0, 1, 2, 3, 5, 10, 20, 50)],
    make_args=lambda rng, p: (rng.randint(1, 3000),),
)

TOP_MEAN = Family(
    name="mean_of_top",
    topic="math",
    function="mean_of_top",
    args=(("items", "ints"),),
    result="float",
    doc="returns the arithmetic mean of the $k largest elements of the non-empty list `items` (of all of "
    "them if it has fewer than $k elements), as a float",
    source="""
def mean_of_top(items):
    top = sorted(items, reverse=True)[:$k]
    return sum(top) / len(top)
""",
    variants=[{"k": k} for k in range(1, 9)],
    make_args=lambda rng, p: (ints(rng, 1, 12, -100, 100),),
)

POLY_MOD = Family(
    name="polynomial_mod",
    topic="math",
    function="poly_mod",
    args=(("coefficients", "ints"), ("x", "int")),
    result="int",
    doc="`coefficients` are c0, c1, ..., cn of the polynomial c0 + c1*x + ... + cn*x**n; return its value at "
    "`x` modulo $m (a number in 0..$m-1; 0 for an empty list)",
    source="""
def poly_mod(coefficients, x):
    value = 0
    for c in reversed(coefficients):
        value = (value * x + c) % $m
    return value
""",
    variants=[{"m": m} for m in (7, 10, 13, 100, 101, 997, 1024, 65537)],
    make_args=lambda rng, p: (ints(rng, 0, 8, -20, 20), rng.randint(-10, 10)),
)

STAIRS = Family(
    name="climb_with_steps",
    topic="dp",
    function="ways",
    args=(("n", "int"),),
    result="int",
    doc="returns the number of ordered ways to climb exactly `n` stairs when each move climbs one of $steps "
    "stairs, modulo 1000000007 (there is 1 way to climb 0 stairs)",
    source="""
def ways(n):
    counts = [1] + [0] * n
    for i in range(1, n + 1):
        counts[i] = sum(counts[i - s] for s in $steps if s <= i) % 1000000007
    return counts[n]
""",
    variants=[{"steps": s} for s in ((1, 2), (1, 3), (2, 3), (1, 2, 3), (1, 4), (2, 5), (1, 3, 5), (3, 4, 7))],
    make_args=lambda rng, p: (rng.randint(0, 300),),
    edge_cases=lambda p: [(0,), (1,)],
)

COINS = Family(
    name="min_coins",
    topic="dp",
    function="min_coins",
    args=(("amount", "int"),),
    result="int",
    doc="returns the least number of coins with values in $coins (any number of each) that sum exactly to "
    "`amount`, or -1 if no combination does (0 coins for amount 0)",
    source="""
def min_coins(amount):
    best = [0] + [None] * amount
    for a in range(1, amount + 1):
        options = [best[a - c] for c in $coins if c <= a and best[a - c] is not None]
        best[a] = min(options) + 1 if options else None
    return -1 if best[amount] is None else best[amount]
""",
    variants=[
        {"coins": c} for c in ((1, 5, 10, 25), (2, 5), (3, 7), (1, 3, 4), (4, 6, 9), (5, 8), (2, 7, 11), (6, 10, 15))
    ],
    make_args=lambda rng, p: (rng.randint(0, 200),),
    edge_cases=lambda p: [(0,), (1,)],
)

EDIT_DISTANCE = Family(
    name="weighted_edit_distance",
    topic="dp",
    function="edit_cost",
    args=(("a", "str"), ("b", "str")),
    result="int",
    doc="returns the least total cost of turning `a` into `b` when inserting or deleting a character "
    "costs 1 and replacing one character by another costs $c",
    source="""
def edit_cost(a, b):
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            replace = prev[j - 1] + (0 if a[i - 1] == b[j - 1] else $c)
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, replace)
        prev = cur
    return prev[len(b)]
""",
    variants=[{"c": c} for c in range(1, 9)],
    make_args=lambda rng, p: (lowercase(rng, 1, 9, "abcd"), lowercase(rng, 1, 9, "abcd")),
)

SPACED_PICK = Family(
    name="max_spaced_sum",
    topic="dp",
    function="max_spaced_sum",
    args=(("items", "ints"),),
    result="int",
    doc="returns the largest sum of a selection of elements of `items` in which any two chosen indices "
    "differ by more than $g (the empty selection, sum 0, is allowed)",
    source="""
def max_spaced_sum(items):
    best = [0] * (len(items) + 1)
    for i, x in enumerate(items, 1):
        best[i] = max(best[i - 1], x + best[max(i - 1 - $g, 0)])
    return best[len(items)]
""",
    variants=[{"g": g} for g in range(1, 9)],
    make_args=lambda rng, p: (ints(rng, 0, 15, -10, 30),),
)

PARTITIONS = Family(
    name="partitions_bounded",
    topic="dp",
    function="partitions",
    args=(("n", "int"),),
    result="int",
    doc="returns the number of ways to write `n` as a sum of positive integers each at most $k, order not "
    "mattering (1 way for n = 0)",
    source="""
def partitions(n):
    counts = [1] + [0] * n
    for part in range(1, $k + 1):
        for total in range(part, n + 1):
            counts[total] += counts[total - part]
    return counts[n]
""",
    variants=[{"k": k} for k in range(2, 10)],
    make_args=lambda rng, p: (rng.randint(0, 80),),
    edge_cases=lambda p: [(0,)],
)

ROBOT = Family(
    name="robot_on_torus",
    topic="simulation",
    function="robot",
    args=(("moves", "str"),),
    result="ints",
    doc="a robot starts at (0, 0) on a $w x $w grid that wraps around at its edges; each character of "
    "`moves` moves it one cell: 'R' x+1, 'L' x-1, 'U' y+1, 'D' y-1, coordinates taken modulo $w; any other "
    "character is ignored. Return [x, y], its final cell",
    source="""
def robot(moves):
    x = y = 0
    step = {"R": (1, 0), "L": (-1, 0), "U": (0, 1), "D": (0, -1)}
    for m in moves:
        if m in step:
            dx, dy = step[m]
            x, y = (x + dx) % $w, (y + dy) % $w
    return [x, y]
""",
    variants=[{"w": w} for w in (2, 3, 4, 5, 7, 8, 10, 16)],
    make_args=lambda rng, p: (lowercase(rng, 0, 30, "RRLLUUDDX"),),
)

JOSEPHUS = Family(
    name="josephus_survivor",
    topic="simulation",
    function="survivor",
    args=(("n", "int"),),
    result="int",
    doc="`n` people numbered 1..n stand in a circle; counting starts at person 1 and every $k-th person "
    "still standing leaves (counting continues after them) until one remains. Return that person's number",
    source="""
def survivor(n):
    people = list(range(1, n + 1))
    index = 0
    while len(people) > 1:
        index = (index + $k - 1) % len(people)
        people.pop(index)
    return people[0]
""",
    variants=[{"k": k} for k in range(2, 10)],
    make_args=lambda rng, p: (rng.randint(1, 200),),
    edge_cases=lambda p: [(1,), (2,)],
)

ELEVATOR = Family(
    name="elevator_distance",
    topic="simulation",
    function="travel",
    args=(("requests", "ints"),),
    result="int",
    doc="an elevator starts at floor $start and visits the floors in `requests` in order; return the total "
    "number of floors it travels (moving from floor a to floor b travels |a - b| floors)",
    source="""
def travel(requests):
    floor = $start
    total = 0
    for target in requests:
        total += abs(target - floor)
        floor = target
    return total
""",
    variants=[{"start": s} for s in (0, 1, 3, 5, 8, 10, 12, 20)],
    make_args=lambda rng, p: (ints(rng, 0, 12, 0, 25),),
)

CELLULAR = Family(
    name="elementary_automaton",
    topic="simulation",
    function="evolve",
    args=(("cells", "str"), ("steps", "int")),
    result="str",
    doc="`cells` is a row of '0' and '1'; cells beyond both ends are always '0'. In one step every cell "
    "becomes bit number (4*left + 2*self + right) of the number $rule (bit 0 is the least significant), "
    "where left and right are its neighbours' values before the step. Return the row after `steps` steps",
    source="""
def evolve(cells, steps):
    row = [int(c) for c in cells]
    for _ in range(steps):
        padded = [0] + row + [0]
        row = [($rule >> (4 * padded[i - 1] + 2 * padded[i] + padded[i + 1])) & 1 for i in range(1, len(padded) - 1)]
    return "".join(str(c) for c in row)
""",
    variants=[{"rule": r} for r in (30, 90, 110, 184, 54, 150, 60, 102)],
    make_args=lambda rng, p: (lowercase(rng, 1, 16, "01"), rng.randint(0, 8)),
)

RPN = Family(
    name="rpn_mod",
    topic="parsing",
    function="rpn",
    args=(("tokens", "words"),),
    result="int",
    doc="evaluates `tokens`, an expression in reverse Polish notation with non-negative integers and the "
    "operators '+', '-' and '*', and returns its value modulo $m (a number in 0..$m-1)",
    source="""
def rpn(tokens):
    stack = []
    for t in tokens:
        if t in ("+", "-", "*"):
            b, a = stack.pop(), stack.pop()
            stack.append(a + b if t == "+" else a - b if t == "-" else a * b)
        else:
            stack.append(int(t))
    return stack[-1] % $m
""",
    variants=[{"m": m} for m in (10, 7, 100, 97, 1000, 13, 2, 1_000_000_007)],
    make_args=lambda rng, p: (_random_rpn(rng, rng.randint(1, 7)),),
)


def _random_rpn(rng, operands: int) -> list[str]:
    """A well-formed RPN token list with ``operands`` numbers (``operands - 1`` operators)."""
    tokens = [str(rng.randint(0, 20))]
    for _ in range(operands - 1):
        tokens += [str(rng.randint(0, 20)), rng.choice("+-*")]
    return tokens


MATH_FAMILIES = [
    SUM_MULTIPLES, DIGIT_POWERS, COLLATZ, PRIMES_MOD, BASE_CONVERT, FIB_MOD, PERFECT_POWER, DIVISORS_ABOVE,
    TOP_MEAN, POLY_MOD, STAIRS, COINS, EDIT_DISTANCE, SPACED_PICK, PARTITIONS, ROBOT, JOSEPHUS, ELEVATOR,
    CELLULAR, RPN,
]  # fmt: skip
