"""The counterexample corpus (sim/corpus.py): inputs encoded to JSON and back exactly, every FAIL
stored, replayed before any search (even with a search budget of 0), fixed ones kept and reported,
bad files and unwritable folders named without stopping the run."""
import json
import math
import shlex
import struct
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from sim.cli import main
from sim.corpus import FIXED, REPLAYED, SCHEMA, SKIPPED, STORED, Corpus, CorpusFormatError, NotEncodable, decode, \
    encode

pytest_plugins = ["pytester"]

USER_CLAIMS = Path(__file__).parent / "data" / "user_claims.py"


# -- encoding -------------------------------------------------------------------------------------
def _same(a, b) -> bool:
    """Equal values of the same types; floats bit for bit (-0.0 is not 0.0), any NaN equal to NaN."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or struct.pack("<d", a) == struct.pack("<d", b)
    if isinstance(a, np.ndarray):
        if a.dtype != b.dtype or a.shape != b.shape or a.flags.writeable != b.flags.writeable:
            return False
        if a.dtype.kind == "f":
            nan = np.isnan(a)
            return bool((nan == np.isnan(b)).all() and (a[~nan].view(np.uint8 if a.size else a.dtype)
                                                         == b[~nan].view(np.uint8 if b.size else b.dtype)).all())
        return bool((a == b).all())
    if isinstance(a, np.generic):
        return a.dtype == b.dtype and _same(a.item(), b.item())
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return a == b


def _readonly(arr):
    arr = arr.copy()
    arr.setflags(write=False)
    return arr


_EXTREME_FLOATS = st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                            st.sampled_from([5e-324, -5e-324, 2.2250738585072014e-308, 1.7976931348623157e308,
                                             -0.0, 0.1, 1 / 3]))
_ARRAYS = st.one_of(
    hnp.arrays(np.float64, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4), elements=_EXTREME_FLOATS),
    hnp.arrays(np.float32, hnp.array_shapes(max_dims=2, max_side=3), elements=st.floats(width=32)),
    hnp.arrays(np.int64, hnp.array_shapes(max_dims=2, max_side=3)),
    hnp.arrays(np.uint64, hnp.array_shapes(max_dims=2, max_side=3)),
    hnp.arrays(np.bool_, hnp.array_shapes(max_dims=2, max_side=3)),
).flatmap(lambda a: st.sampled_from([a, _readonly(a)]))
_LEAVES = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(min_value=2**64, max_value=2**80), _EXTREME_FLOATS,
    st.text(max_size=8), st.fractions(), _ARRAYS,
    st.floats(width=32).map(np.float32), st.integers(-2**63, 2**63 - 1).map(np.int64), st.booleans().map(np.bool_),
)
_NESTED = st.recursive(_LEAVES, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.lists(inner, max_size=4).map(tuple),
    st.dictionaries(st.text(max_size=6), inner, max_size=4),
    st.dictionaries(st.sampled_from(["__tuple__", "__ndarray__", "x"]), inner, max_size=3),  # keys that look like tags
    st.dictionaries(st.one_of(st.integers(), st.tuples(st.integers(), st.text(max_size=3))), inner, max_size=3),
), max_leaves=12)


@given(_NESTED)
def test_encode_then_decode_gives_back_the_same_object(value):
    text = json.dumps(encode(value), allow_nan=False)  # strict JSON: no NaN or Infinity literals
    assert _same(decode(json.loads(text)), value)


def test_float64_is_written_exactly_and_readably():
    pi = np.array([[1 / 3, 2 / 3], [np.nextafter(0.5, 1), 0.5 - 2**-53]])
    enc = encode(pi)
    assert enc == {"__ndarray__": {"dtype": "float64", "shape": [2, 2], "data": pi.tolist()}}
    assert np.array_equal(decode(json.loads(json.dumps(enc))), pi)
    assert encode(float("-inf")) == {"__float__": "-inf"} and encode((1, [2])) == {"__tuple__": [1, [2]]}
    assert encode(Fraction(-1, 3)) == {"__fraction__": "-1/3"}


def test_objects_of_the_tools_own_classes_round_trip_without_their_caches():
    from theory.structures import CausalTree

    tree = CausalTree([-1, 0, 0, 1])
    tree.depth(3)  # fills the cached depths
    enc = encode((np.eye(2), tree, 2))
    assert "depths" not in json.dumps(enc)
    pi, back, h = decode(json.loads(json.dumps(enc)))
    assert type(back) is CausalTree and back.parents.tolist() == [-1, 0, 0, 1] and not back.parents.flags.writeable
    assert back.depth(3) == 2 and h == 2 and np.array_equal(pi, np.eye(2))


def test_what_has_no_exact_json_form_is_refused():
    import collections

    for value in ({1, 2}, 1 + 2j, np.array([1 + 1j]), collections.OrderedDict(a=1), object()):
        with pytest.raises(NotEncodable):
            encode(value)


@pytest.mark.parametrize("doc", [
    {"__object__": {"class": "os:system", "state": {}}},  # another package's: never rebuilt
    {"__object__": {"class": "sim.__main__:main", "state": {}}},  # importing it would run the command line
    {"__enum__": {"class": "subprocess:Popen", "value": 1}},
    {"__ndarray__": {"dtype": "object", "shape": [1], "data": [1]}},
    {"__ndarray__": {"dtype": "float64", "shape": [3], "data": [1.0, 2.0]}},
    {"__ndarray__": {"dtype": None, "shape": [1], "data": [1.0]}},
    {"__float__": "infinity"},
    {"__fraction__": "1/3 + os.system('x')"},
    {"__tuple__": [1], "extra": 2},
    {"__dict__": [[[1, 2], 3]]},  # an unhashable key
])
def test_malformed_encodings_are_format_errors(doc):
    import sys

    with pytest.raises(CorpusFormatError):
        decode(doc)
    assert "sim.__main__" not in sys.modules


# -- the corpus through the command line ------------------------------------------------------------
# The former README plugin (docs/tutorials/own-claims.md has its successor), with a bound that is false: eta_TV([[0,1],[1,0]]) = 1.
_PLUGIN = '''
from sim.claims.base import Claim, Source, matrices_strategy, property_tier
from theory import dobrushin
from hypothesis import strategies as st

def _check(ctx):
    strategy = matrices_strategy(ctx, st.integers(2, 4))      # the user's prior, if one is given
    return property_tier(ctx, strategy,
                         violates=lambda pi: dobrushin(pi) > BOUND,
                         record=lambda pi: {"pi": pi.tolist()},
                         what="Dobrushin coefficient <= BOUND")

CLAIMS = [Claim(id="CID", title="Dobrushin bound", source=Source("MY", "folklore"),
                statement="eta_TV(pi) <= BOUND for every stochastic pi", assumptions=(),
                checks={"property": _check},
                settings={p: {"tiers": ("property",), "max_examples": 60} for p in ("quick", "standard", "paper")},
                prior_dependent=True)]
'''


def _plugin(tmp_path, cid: str, bound: str) -> Path:
    path = tmp_path / "my_claims.py"
    path.write_text(_PLUGIN.replace("CID", cid).replace("BOUND", bound))
    return path


def _run(plugin: Path, cid: str, out: Path, *extra: str) -> tuple[int, dict]:
    code = main(["run", "--plugin", str(plugin), "--claims", cid, "--out", str(out), "--no-progress", *extra])
    return code, json.loads((out / "results.json").read_text())["claims"][0]["tiers"][0]


def test_a_fail_is_stored_then_replayed_with_no_search_budget_then_reported_fixed(tmp_path, capsys):
    cid, out = "CORPUS.DOB", tmp_path / "run"
    plugin = _plugin(tmp_path, cid, "0.5")
    code, tier = _run(plugin, cid, out)
    assert code == 1 and tier["verdict"] == "FAIL" and "hypothesis found a counterexample" in tier["summary"]
    [note] = tier["corpus"]
    assert note["status"] == STORED
    files = list((out / "corpus" / cid).glob("property-*.json"))
    assert [str(f) for f in files] == [note["file"]]
    entry = json.loads(files[0].read_text())
    assert entry["schema"] == SCHEMA and entry["claim"] == cid and entry["tier"] == "property"
    assert entry["reading"] == "Dobrushin coefficient <= 0.5" and entry["replayable"] is True
    assert entry["record"] == tier["counterexample"] and entry["fixed"] is None
    assert entry["found"]["code_version"]["package"] and entry["found"]["seed"] == 0
    assert np.array_equal(decode(entry["inputs"]), np.array(tier["counterexample"]["pi"]))

    # Change nothing, and search nothing: the corpus alone decides.
    capsys.readouterr()
    code, tier = _run(plugin, cid, out, "--budget", "0")
    assert code == 1 and tier["verdict"] == "FAIL"
    assert f"counterexample replayed from the corpus {files[0]} before any search" in tier["summary"]
    assert tier["counterexample"]["replayed from the corpus"] == str(files[0])
    assert tier["numbers"][0]["value"] == 0 and "not searched" in tier["numbers"][0]["note"]
    assert [n["status"] for n in tier["corpus"]] == [REPLAYED]
    assert "1 replayed, still fails" in capsys.readouterr().out
    report = (out / "report.md").read_text()
    assert "Counterexample corpus:" in report and f"replayed, still fails: `{files[0]}`" in report

    # Fix the claim (same file): the stored counterexample is reported fixed and kept, marked so.
    plugin = _plugin(tmp_path, cid, "1.0 + 1e-12")
    code, tier = _run(plugin, cid, out)
    assert code == 0 and tier["verdict"] == "PASS"
    [note] = tier["corpus"]
    assert note["status"] == FIXED and note["file"] == str(files[0]) and "no longer fails" in note["detail"]
    entry = json.loads(files[0].read_text())
    assert entry["fixed"]["run_id"] and entry["fixed"]["detail"] == "the conclusion holds on it"
    # With no budget and nothing that still fails, nothing decides: not a PASS.
    code, tier = _run(plugin, cid, out, "--budget", "0")
    assert tier["verdict"] == "INCONCLUSIVE" and tier["corpus"][0]["status"] == FIXED
    assert "fixed since run" in tier["corpus"][0]["detail"]


def test_the_stored_reproduce_command_finds_a_plugin_claims_counterexample_again(tmp_path, capsys):
    cid, out = "CORPUS.AGAIN", tmp_path / "run"
    plugin = _plugin(tmp_path, cid, "0.5")
    code, tier = _run(plugin, cid, out, "--z", "4")
    entry = json.loads(next((out / "corpus" / cid).glob("property-*.json")).read_text())
    command = shlex.split(entry["reproduce"])
    assert command[:2] == ["icl-verify", "run"] and ["--plugin", str(plugin)] == command[-4:-2]
    assert command[-2:] == ["--z", "4"]
    again = tmp_path / "again"
    assert main(command[1:] + ["--out", str(again), "--no-progress"]) == 1
    rerun = json.loads((again / "results.json").read_text())["claims"][0]["tiers"][0]
    assert rerun["verdict"] == "FAIL" and rerun["counterexample"]["pi"] == tier["counterexample"]["pi"]


def test_a_shared_corpus_is_replayed_by_a_run_in_another_folder(tmp_path):
    cid, corpus = "CORPUS.SHARED", tmp_path / "shared-corpus"
    plugin = _plugin(tmp_path, cid, "0.5")
    assert _run(plugin, cid, tmp_path / "a", "--corpus", str(corpus))[1]["corpus"][0]["status"] == STORED
    code, tier = _run(plugin, cid, tmp_path / "b", "--corpus", str(corpus), "--budget", "0")
    assert code == 1 and tier["corpus"][0]["status"] == REPLAYED and not (tmp_path / "b" / "corpus").exists()


def test_a_malformed_corpus_file_is_named_and_skipped(tmp_path, capsys):
    cid, out = "CORPUS.BAD", tmp_path / "run"
    folder = out / "corpus" / cid
    folder.mkdir(parents=True)
    (folder / "property-notjson.json").write_text("{not json")
    (folder / "property-schema.json").write_text(json.dumps({"schema": "other", "claim": cid}))
    (folder / "property-inputs.json").write_text(json.dumps(
        {"schema": SCHEMA, "claim": cid, "tier": "property", "replayable": True, "prior": None,
         "inputs": {"__object__": {"class": "os:system", "state": {}}}}))
    code, tier = _run(_plugin(tmp_path, cid, "0.5"), cid, out)
    assert code == 1 and tier["verdict"] == "FAIL" and "hypothesis found" in tier["summary"]  # searched as usual
    skipped = {Path(n["file"]).name: n["detail"] for n in tier["corpus"] if n["status"] == SKIPPED}
    assert set(skipped) == {"property-notjson.json", "property-schema.json", "property-inputs.json"}
    assert "cannot be read as JSON" in skipped["property-notjson.json"]
    assert "schema is 'other'" in skipped["property-schema.json"]
    assert "cannot be decoded" in skipped["property-inputs.json"] and "os:system" in skipped["property-inputs.json"]
    err = capsys.readouterr().err
    assert f"icl-verify: corpus: {folder / 'property-notjson.json'}: malformed corpus file" in err


def test_an_unwritable_corpus_is_said_and_the_run_completes(tmp_path, capsys):
    cid, out = "CORPUS.RO", tmp_path / "run"
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the corpus folder should be")
    code, tier = _run(_plugin(tmp_path, cid, "0.5"), cid, out, "--corpus", str(blocked))
    assert code == 1 and tier["verdict"] == "FAIL" and tier["counterexample"]["pi"]
    assert tier["corpus"][0]["status"] == SKIPPED and "could not be stored" in tier["corpus"][0]["detail"]
    assert (out / "report.md").exists()
    assert f"icl-verify: corpus: {blocked / cid}" in capsys.readouterr().err


# A Monte Carlo claim made wrong (tests/sim/data/user_claims.py's USER.MEAN with an offset): its
# inputs are drawn inside the check, so its FAIL is kept as a record that its seed reproduces.
_MEAN = '''
import importlib.util
spec = importlib.util.spec_from_file_location("uc_corpus", {path!r})
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
import dataclasses
CLAIMS = [dataclasses.replace(c, id="CORPUS.MEAN", params={{"offset": {offset}}}) for c in m.CLAIMS if c.id == "USER.MEAN"]
'''


def test_a_fail_of_another_tier_is_kept_as_a_record_and_marked_fixed_when_its_seed_passes(tmp_path):
    plugin, out, cid = tmp_path / "mean.py", tmp_path / "run", "CORPUS.MEAN"
    plugin.write_text(_MEAN.format(path=str(USER_CLAIMS), offset=0.5))
    code, tier = _run(plugin, cid, out)
    assert code == 1 and tier["tier"] == "montecarlo" and tier["corpus"][0]["status"] == STORED
    [path] = (out / "corpus" / cid).glob("montecarlo-*.json")
    entry = json.loads(path.read_text())
    assert entry["replayable"] is False and "inputs" not in entry and "seed reproduces it" in entry["not_replayable_because"]
    assert entry["record"] == tier["counterexample"] and f"--claims {cid} --profile quick --seed 0 --plugin " in entry["reproduce"]
    assert "already in the corpus" in _run(plugin, cid, out)[1]["corpus"][0]["detail"]
    plugin.write_text(_MEAN.format(path=str(USER_CLAIMS), offset=0.0) + "# fixed\n")
    code, tier = _run(plugin, cid, out)
    assert code == 0 and tier["corpus"][0]["status"] == FIXED
    assert json.loads(path.read_text())["fixed"]["detail"] == "the tier PASSes with the seed that found it"


# -- the corpus inside property_tier -----------------------------------------------------------------
def _context(tmp_path, claim, corpus_dir, *, prior=None, max_examples=40):
    from sim.claims.base import Context
    from sim.runner import RunConfig

    config = RunConfig(prior=None if prior is None else prior.spec())
    return Context(claim=claim, profile="quick", seed=0, out_dir=tmp_path, prior=prior,
                   overrides={"max_examples": max_examples}, corpus=Corpus(corpus_dir, config))


def _bounded_claim(cid, bound, *, with_assumptions):
    from sim.claims.base import Claim, Source, matrices_strategy, property_tier
    from theory import dobrushin

    def check(ctx):
        return property_tier(ctx, matrices_strategy(ctx, st.integers(2, 3)), lambda pi: dobrushin(pi) > bound,
                             lambda pi: {"pi": pi.tolist()}, what=f"eta <= {bound}",
                             assumptions_of=(lambda pi: {"no entry above 0.99": bool(pi.max() <= 0.99)})
                             if with_assumptions else None)

    return Claim(id=cid, title="t", source=Source("T", "test"), statement="s", assumptions=(),
                 checks={"property": check}, settings={"quick": {"tiers": ("property",)}})


def test_under_a_prior_replay_decides_and_other_priors_entries_are_not_replayed(tmp_path):
    from sim.priors import parse_prior

    prior, corpus = parse_prior("dirichlet(alpha=0.3)"), tmp_path / "corpus"
    claim = _bounded_claim("T.PRIOR", 0.5, with_assumptions=True)
    first = claim.checks["property"](_context(tmp_path, claim, corpus, prior=prior))
    assert first.verdict.value == "FAIL" and first.corpus[0]["status"] == STORED
    again = claim.checks["property"](_context(tmp_path, claim, corpus, prior=prior, max_examples=0))
    assert again.verdict.value == "FAIL" and "replayed from the corpus" in again.summary
    assert [n["status"] for n in again.corpus] == [REPLAYED]
    other = claim.checks["property"](_context(tmp_path, claim, corpus, max_examples=0))  # the tool's own space
    assert other.verdict.value == "INCONCLUSIVE"
    assert other.corpus[0]["status"] == SKIPPED and "drawn under another prior" in other.corpus[0]["detail"]


def test_a_replayed_input_that_now_breaks_an_assumption_is_fixed_not_a_fail(tmp_path):
    corpus = tmp_path / "corpus"
    loose = _bounded_claim("T.ASSUME", 0.5, with_assumptions=False)
    assert loose.checks["property"](_context(tmp_path, loose, corpus)).verdict.value == "FAIL"
    # The same claim, now assuming no entry above 0.99: the stored permutation matrix breaks it.
    strict = _bounded_claim("T.ASSUME", 0.5, with_assumptions=True)
    res = strict.checks["property"](_context(tmp_path, strict, corpus, max_examples=0))
    assert res.verdict.value == "INCONCLUSIVE" and res.corpus[0]["status"] == FIXED
    assert "it no longer meets no entry above 0.99" in res.corpus[0]["detail"]


def test_an_input_without_json_form_is_stored_as_a_record_only(tmp_path):
    from sim.claims.base import Claim, Source, property_tier

    def check(ctx):
        return property_tier(ctx, st.frozensets(st.integers(0, 5), min_size=2), lambda s: True,
                             lambda s: {"members": sorted(s)}, what="never")

    claim = Claim(id="T.SET", title="t", source=Source("T", "test"), statement="s", assumptions=(),
                  checks={"property": check}, settings={"quick": {"tiers": ("property",)}})
    res = check(_context(tmp_path, claim, tmp_path / "corpus"))
    assert res.verdict.value == "FAIL" and "not replayable" in res.corpus[0]["detail"]
    [path] = (tmp_path / "corpus" / "T.SET").glob("property-*.json")
    entry = json.loads(path.read_text())
    assert entry["replayable"] is False and "frozenset" in entry["not_replayable_because"]
    assert entry["record"] == {"members": [0, 1]}


# -- the pytest plugin ---------------------------------------------------------------------------------
def test_pytest_icl_corpus_replays_a_stored_fail(pytester, monkeypatch):
    """``pytest --icl-verify ... --icl-corpus DIR``: the first run stores the FAIL, the second replays it."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    pytester.makepyfile(my_claims=_PLUGIN.replace("CID", "PYT.DOB").replace("BOUND", "0.5"))
    args = ("--icl-verify", "PYT.DOB", "--icl-plugin", "my_claims.py", "--icl-corpus", "corpus")
    first = pytester.runpytest_subprocess(*args)
    first.assert_outcomes(failed=1)
    first.stdout.fnmatch_lines(["counterexample corpus:", "*stored: */corpus/PYT.DOB/property-*.json: stored*"])
    second = pytester.runpytest_subprocess(*args)
    second.assert_outcomes(failed=1)
    second.stdout.fnmatch_lines(["*counterexample replayed from the corpus*corpus/PYT.DOB/property-*.json*",
                                 "*replayed, still fails: *corpus/PYT.DOB/property-*.json: replayed before any search*"])
