"""The lexer's regex cache (sglog/recache.py): the same patterns as re.compile, kept across runs."""

from __future__ import annotations

import re

import pytest

from sglog import grammar, recache

PATTERNS = [
    (r"(?P<A>[0-9]+)|(?P<B>[a-z]+)", 0),
    (r"Decode batch\. |(?P<X>#running-req: )", re.M),
    (r"(?i)hello\s+(world)?", 0),
    (r"caf\u00e9|\u4e2d", 0),
]
TEXTS = ["123", "abc", "Decode batch. x", "#running-req: 5", "HELLO   world", "café", "中", "", "!"]


def test_cached_patterns_match_like_re_compile(tmp_path):
    path = tmp_path / "sre.pickle"
    first = recache.CachedRe(path)
    for pat, flags in PATTERNS:
        a, b = first.compile(pat, flags), re.compile(pat, flags)
        assert (a.pattern, a.flags, a.groups, a.groupindex) == (b.pattern, b.flags, b.groups, b.groupindex)
        for t in TEXTS:
            ma, mb = a.match(t), b.match(t)
            assert (ma and (ma.span(), ma.groups(), ma.lastgroup)) == (mb and (mb.span(), mb.groups(), mb.lastgroup))
    first.save()
    assert path.exists()


def test_a_saved_cache_is_used_and_a_bad_one_is_ignored(tmp_path, monkeypatch):
    path = tmp_path / "sre.pickle"
    c = recache.CachedRe(path)
    for pat, flags in PATTERNS:
        c.compile(pat, flags)
    c.save()

    def no_compiler(*_a):
        raise AssertionError("compiled again")

    monkeypatch.setattr(recache, "_spec", no_compiler)
    again = recache.CachedRe(path)
    for pat, flags in PATTERNS:
        a, b = again.compile(pat, flags), re.compile(pat, flags)
        for t in TEXTS:
            ma, mb = a.match(t), b.match(t)
            assert (ma and (ma.span(), ma.groups())) == (mb and (mb.span(), mb.groups()))
    assert again.new == 0  # (all from the file)
    monkeypatch.undo()
    path.write_bytes(b"not a pickle")
    broken = recache.CachedRe(path)
    assert broken.codes == {}
    assert broken.compile(r"(?P<A>[0-9]+)").match("42").group("A") == "42"
    # an entry that is not valid SRE code falls back to re.compile
    broken.codes[(r"x+", 0)] = (0, [1, 2, 3], 0, {}, (None,))
    assert broken.compile(r"x+").match("xx").group() == "xx"
    with pytest.raises(re.error):
        broken.compile(r"(unclosed")


def test_the_grammar_parser_lexes_through_the_cache():
    p = grammar.parser()
    lexer = p.parser.lexer
    assert all(isinstance(lx.re, recache.CachedRe) for lx in lexer.lexers.values())
    assert p.parse("Load weight begin. avail mem=75.12 GB").data == "weight_load_begin"


def test_a_cache_others_could_have_written_is_not_loaded(tmp_path):
    """The caches live in the shared temporary directory: a pickle writable by others (or not
    ours) is not loaded."""
    path = tmp_path / "sre.pickle"
    c = recache.CachedRe(path)
    c.compile(r"(?P<A>[0-9]+)")
    c.save()
    assert recache.CachedRe(path).codes
    path.chmod(0o666)
    assert recache.CachedRe(path).codes == {}


def test_sglogs_own_patterns_are_compiled_through_a_cache_of_their_own():
    """``grammar.re_compile`` (terminals, record heads, line shapes) gives re.compile's patterns,
    and ``save_caches`` keeps their code for the next run, in a file apart from the lexer's."""
    pat = grammar.envelope_regex()
    a, b = grammar.re_compile(pat), re.compile(pat)
    assert (a.pattern, a.flags, a.groups, a.groupindex) == (b.pattern, b.flags, b.groups, b.groupindex)
    line = "[2026-02-23 10:15:02 TP3] Decode batch, #running-req: 1"
    assert a.match(line).groupdict() == b.match(line).groupdict()
    assert grammar.compiled("ENV_TS").pattern == grammar.terminal_pattern("ENV_TS")
    own = grammar._own_regexes()
    assert (pat, 0) in own.patterns and own.path != recache.cache_path(grammar.grammar_text())
    grammar.save_caches()
    assert (pat, 0) in recache.CachedRe(own.path).codes


def test_a_cache_over_its_size_keeps_only_this_runs_patterns(tmp_path, monkeypatch):
    monkeypatch.setattr(recache, "MAX_ENTRIES", 3)
    path = tmp_path / "sre.pickle"
    c = recache.CachedRe(path)
    for i in range(5):
        c.compile(f"a{i}+")
    c.save()
    again = recache.CachedRe(path)
    assert len(again.codes) == 5  # (not over: 5 > 3, but all five are this run's)
    again.compile("b+")
    again.save()
    assert set(recache.CachedRe(path).codes) == {("b+", 0)}
