"""Bundled families about strings and parsing."""

from __future__ import annotations

from envs.code.bundled.spec import Family, lowercase, word_list

__all__ = ["TEXT_FAMILIES"]


def _sentence(rng, low=1, high=8, alphabet="abcdefghijklmnop"):
    return " ".join(word_list(rng, low, high, alphabet))


CAESAR = Family(
    name="caesar_shift",
    topic="strings",
    function="caesar_shift",
    args=(("text", "str"),),
    result="str",
    doc="returns `text` with every lowercase letter shifted $k places forward in the alphabet, wrapping "
    "from 'z' to 'a'; every other character is unchanged",
    source="""
def caesar_shift(text):
    out = []
    for ch in text:
        if "a" <= ch <= "z":
            out.append(chr((ord(ch) - ord("a") + $k) % 26 + ord("a")))
        else:
            out.append(ch)
    return "".join(out)
""",
    variants=[{"k": k} for k in (1, 3, 5, 7, 11, 13, 20, 25)],
    make_args=lambda rng, p: (_sentence(rng, 1, 6, "abcxyzmnopq") + rng.choice(["", "!", "?", " 42"]),),
    edge_cases=lambda p: [("",), ("zzz",)],
)

COUNT_CHARS = Family(
    name="count_chars_in_set",
    topic="strings",
    function="count_chars",
    args=(("text", "str"),),
    result="int",
    doc='returns how many characters of `text` belong to the set "$chars" (case-sensitive)',
    source="""
def count_chars(text):
    return sum(1 for ch in text if ch in "$chars")
""",
    variants=[{"chars": c} for c in ("aeiou", "xyz", "0123456789", "AEIOU", "abc", "qwerty", "mn", "!?.")],
    make_args=lambda rng, p: (lowercase(rng, 0, 30, "aeiouxyzbcmnqwAEIO0123!?. "),),
    edge_cases=lambda p: [("",)],
)

LONGEST_RUN = Family(
    name="longest_run_of_char",
    topic="strings",
    function="longest_run",
    args=(("text", "str"),),
    result="int",
    doc="returns the length of the longest block of consecutive '$ch' characters in `text` (0 if there is none)",
    source="""
def longest_run(text):
    best = current = 0
    for c in text:
        if c == "$ch":
            current += 1
            best = max(best, current)
        else:
            current = 0
    return best
""",
    variants=[{"ch": c} for c in "abcxyz01"],
    make_args=lambda rng, p: (lowercase(rng, 0, 25, p["ch"] * 4 + "abx1"),),
    edge_cases=lambda p: [("",), (p["ch"] * 3,)],
)

RLE = Family(
    name="run_length_encode",
    topic="strings",
    function="rle",
    args=(("text", "str"),),
    result="str",
    doc="returns the run-length encoding of `text`: each maximal block of one repeated character is written "
    "as the count followed by the character if the block is at least $m long, and unchanged otherwise "
    "(so with minimum 2, 'aaabcc' becomes '3ab2c')",
    source="""
def rle(text):
    out = []
    i = 0
    while i < len(text):
        j = i
        while j < len(text) and text[j] == text[i]:
            j += 1
        size = j - i
        if size >= $m:
            out.append(str(size) + text[i])
        else:
            out.append(text[i] * size)
        i = j
    return "".join(out)
""",
    variants=[{"m": m} for m in (1, 2, 3, 4, 5, 6, 8, 10)],
    make_args=lambda rng, p: ("".join(rng.choice("abc") * rng.randint(1, 9) for _ in range(rng.randint(0, 6))),),
    edge_cases=lambda p: [("",)],
)

NEAR_PALINDROME = Family(
    name="near_palindrome",
    topic="strings",
    function="near_palindrome",
    args=(("text", "str"),),
    result="bool",
    doc="returns whether `text`, after removing every character that is not a letter or digit and "
    "lowercasing, can be read as a palindrome with at most $k mismatched pairs (positions i and n-1-i "
    "holding different characters, for i < n/2)",
    source="""
def near_palindrome(text):
    s = [c.lower() for c in text if c.isalnum()]
    mismatches = sum(1 for i in range(len(s) // 2) if s[i] != s[-1 - i])
    return mismatches <= $k
""",
    variants=[{"k": k} for k in range(8)],
    make_args=lambda rng, p: (
        (lambda h: h + rng.choice(["", "x"]) + h[::-1])(lowercase(rng, 0, 8, "abAB ,"))
        if rng.random() < 0.5
        else lowercase(rng, 0, 20, "abcAB ,!"),
    ),
    edge_cases=lambda p: [("",), ("ab" * 10,)],
)

LONG_WORDS = Family(
    name="words_longer_than",
    topic="strings",
    function="long_words",
    args=(("words", "words"),),
    result="words",
    doc="returns, in their original order, the words of `words` that are longer than $k characters",
    source="""
def long_words(words):
    return [w for w in words if len(w) > $k]
""",
    variants=[{"k": k} for k in range(8)],
    make_args=lambda rng, p: (word_list(rng, 1, 10),),
)

CAPITALIZE_NTH = Family(
    name="capitalize_every_nth_word",
    topic="strings",
    function="capitalize_nth",
    args=(("text", "str"),),
    result="str",
    doc="returns `text` (words separated by single spaces) with the first letter of every $n-th word made "
    "uppercase (words number $n, 2*$n, ... counting from 1); other words are unchanged",
    source="""
def capitalize_nth(text):
    words = text.split(" ")
    for i in range($n - 1, len(words), $n):
        words[i] = words[i][:1].upper() + words[i][1:]
    return " ".join(words)
""",
    variants=[{"n": n} for n in range(1, 9)],
    make_args=lambda rng, p: (_sentence(rng, 1, 12),),
)

KTH_FREQUENT = Family(
    name="kth_most_frequent_letter",
    topic="strings",
    function="kth_frequent",
    args=(("text", "str"),),
    result="str",
    doc="returns the letter of rank $k when the distinct letters of `text` are sorted by decreasing count, "
    "ties broken alphabetically (rank 1 is the most frequent); '-' if fewer than $k distinct letters occur",
    source="""
def kth_frequent(text):
    counts = {}
    for c in text:
        if c.isalpha():
            counts[c] = counts.get(c, 0) + 1
    order = sorted(counts, key=lambda c: (-counts[c], c))
    return order[$k - 1] if len(order) >= $k else "-"
""",
    variants=[{"k": k} for k in range(1, 9)],
    make_args=lambda rng, p: (lowercase(rng, 0, 40, "aaabbbcdeeefghij  "),),
)

ANAGRAM_CLASSES = Family(
    name="anagram_classes",
    topic="strings",
    function="anagram_classes",
    args=(("words", "words"),),
    result="int",
    doc="returns the number of distinct anagram classes among the words of `words` that have at least $k "
    "letters (two words are in one class when one is a rearrangement of the other)",
    source="""
def anagram_classes(words):
    return len({"".join(sorted(w)) for w in words if len(w) >= $k})
""",
    variants=[{"k": k} for k in range(1, 9)],
    make_args=lambda rng, p: (
        [
            rng.choice(["".join(rng.sample("abcdefg", 3)), lowercase(rng, 1, 12, "abc")])
            for _ in range(rng.randint(0, 14))
        ],
    ),
    edge_cases=lambda p: [(["a" * p["k"], "b" * (p["k"] - 1) + "a", "a" + "b" * (p["k"] - 1)],)],
)

BRACKETS = Family(
    name="balanced_brackets_depth",
    topic="parsing",
    function="balanced",
    args=(("text", "str"),),
    result="bool",
    doc="returns whether the brackets ()[]{} in `text` are balanced and properly nested, and never nested "
    "more than $d deep (other characters are ignored; '(())' has depth 2)",
    source="""
def balanced(text):
    pairs = {")": "(", "]": "[", "}": "{"}
    stack = []
    for c in text:
        if c in "([{":
            stack.append(c)
            if len(stack) > $d:
                return False
        elif c in pairs:
            if not stack or stack.pop() != pairs[c]:
                return False
    return not stack
""",
    variants=[{"d": d} for d in range(1, 9)],
    make_args=lambda rng, p: (
        (lambda n: "(" * n + "[x]" + ")" * n)(rng.randint(0, 9))
        if rng.random() < 0.4
        else lowercase(rng, 0, 16, "()[]{}a"),
    ),
    edge_cases=lambda p: [("",), ("(" * p["d"] + ")" * p["d"],)],
)

KEY_VALUES = Family(
    name="sum_key_values",
    topic="parsing",
    function="sum_values",
    args=(("text", "str"),),
    result="int",
    doc="reads `text`, a list of entries key=value separated by '$sep' (keys are lowercase words, values "
    "integers, possibly negative; empty entries are skipped) and returns the sum of the values whose key "
    "has at most $k letters",
    source="""
def sum_values(text):
    total = 0
    for entry in text.split("$sep"):
        if not entry:
            continue
        key, value = entry.split("=")
        if len(key) <= $k:
            total += int(value)
    return total
""",
    variants=[
        {"sep": s, "k": k} for s, k in ((";", 2), (",", 3), ("|", 4), ("&", 1), (";", 5), (",", 6), ("|", 2), ("&", 3))
    ],
    make_args=lambda rng, p: (
        p["sep"].join(f"{lowercase(rng, 1, 6, 'abcde')}={rng.randint(-50, 99)}" for _ in range(rng.randint(0, 6))),
    ),
)

CASE_CONVERT = Family(
    name="to_camel_case",
    topic="parsing",
    function="to_camel",
    args=(("name", "str"),),
    result="str",
    doc="returns the identifier `name`, whose parts are separated by '$sep' (consecutive separators "
    "count as one; leading and trailing ones are ignored), in $style: the parts concatenated, each "
    "capitalized (first letter upper, the rest lower)$first_rule",
    source="""
def to_camel(name):
    parts = [p for p in name.split("$sep") if p]
    words = [p[:1].upper() + p[1:].lower() for p in parts]
    if $lower_first and words:
        words[0] = words[0].lower()
    return "".join(words)
""",
    variants=[
        {
            "sep": sep,
            "lower_first": lower,
            "style": "camelCase" if lower else "PascalCase",
            "first_rule": ", except that the first part is all lowercase" if lower else "",
        }
        for sep in ("_", "-", ".", "/")
        for lower in (True, False)
    ],
    make_args=lambda rng, p: (p["sep"].join(lowercase(rng, 0, 5, "abcXYZ") for _ in range(rng.randint(1, 5))),),
)

TIME_ADD = Family(
    name="clock_add_minutes",
    topic="parsing",
    function="add_minutes",
    args=(("clock", "str"),),
    result="str",
    doc="returns the time $m minutes after `clock`, a 24-hour time 'HH:MM', in the same format "
    "(wrapping past midnight)",
    source="""
def add_minutes(clock):
    hours, minutes = map(int, clock.split(":"))
    total = (hours * 60 + minutes + $m) % (24 * 60)
    return "%02d:%02d" % (total // 60, total % 60)
""",
    variants=[{"m": m} for m in (1, 15, 45, 60, 90, 135, 600, 1439)],
    make_args=lambda rng, p: (f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}",),
    edge_cases=lambda p: [("23:59",), ("00:00",)],
)

IPV4 = Family(
    name="count_ipv4",
    topic="parsing",
    function="count_ipv4",
    args=(("words", "words"),),
    result="int",
    doc="returns how many words of `words` are IPv4 addresses: four decimal numbers separated by dots, "
    "each between 0 and $top, written without leading zeros (so '0' is fine and '01' is not)",
    source="""
def count_ipv4(words):
    def valid(word):
        parts = word.split(".")
        if len(parts) != 4:
            return False
        for part in parts:
            if not part.isdigit() or (len(part) > 1 and part[0] == "0") or int(part) > $top:
                return False
        return True

    return sum(1 for w in words if valid(w))
""",
    variants=[{"top": t} for t in (255, 127, 99, 200, 63, 31, 250, 9)],
    make_args=lambda rng, p: (
        [
            ".".join(
                rng.choice([str(rng.randint(0, 300)), "0" + str(rng.randint(0, 9)), "x"])
                for _ in range(rng.choice([3, 4, 4, 4, 5]))
            )
            for _ in range(rng.randint(0, 8))
        ],
    ),
)

TEXT_FAMILIES = [
    CAESAR, COUNT_CHARS, LONGEST_RUN, RLE, NEAR_PALINDROME, LONG_WORDS, CAPITALIZE_NTH, KTH_FREQUENT,
    ANAGRAM_CLASSES, BRACKETS, KEY_VALUES, CASE_CONVERT, TIME_ADD, IPV4,
]  # fmt: skip
