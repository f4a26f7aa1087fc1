"""A hostile new user's inputs, beyond the issue's list (issue 49): a table of cases, each with the
exit it must get and what its one line must say (or that it runs to a whole report). The contract
is in docs/inputs.md; tests/faults/test_inputs.py keeps the issue's own causes closed."""
import os
from dataclasses import dataclass, field

import pytest

from .conftest import assert_finished_run, assert_input_error, run_cli

OK_PLUGIN = ("from sim.claims.base import Claim, Source\nfrom sim.verdict import Outcome, TierResult, Verdict\n\n"
             "def _ok(ctx):\n    return TierResult('exact', Verdict.PASS, Outcome.HELD, 'held')\n\n"
             "CLAIMS = [Claim(id='U.OK', title='t', source=Source('U', 'L1'), statement='s', assumptions=(),\n"
             "                checks={'exact': _ok}, settings={'quick': {'tiers': ('exact',)}})]\n")
SAMPLER = "import numpy as np\n\ndef draw(rng, n):\n    return {ret}\n"
RAN = "ran"  # exit 0 or 1 with a whole run folder in ./o


@dataclass
class Case:
    id: str
    argv: list
    expect: object = 2  # 2 (with ``says`` in its one line) or RAN
    says: tuple = ()
    files: dict = field(default_factory=dict)  # name -> text | bytes | ("dir",) | ("link", to) | ("fifo",) | ("sparse", n)
    env: dict = field(default_factory=dict)


def _sampler(ret):
    return {"s.py": SAMPLER.format(ret=ret)}


def _prior(spec, *more):
    return ["prior", spec, "--claims", "W.L3", "--out", "afile", *more]


def _run(*more):
    return ["run", "--claims", "N.K7", "--out", "o", *more]


CASES = [
    # -- the command line ---------------------------------------------------------------------------
    Case("no-command", [], 2, ("COMMAND",)),
    Case("unknown-command", ["frobnicate"], 2, ("invalid choice",)),
    Case("unknown-option", _run("--sed", "3"), 2, ("unrecognized arguments: --sed",)),
    Case("seed-float", _run("--seed", "1.5"), 2, ("argument --seed", "'1.5'")),
    Case("seed-exponent", _run("--seed", "1e3"), 2, ("argument --seed",)),
    Case("seed-negative", _run("--seed", "-3"), 2, ("argument --seed",)),
    Case("seed-empty", _run("--seed", ""), 2, ("argument --seed",)),
    Case("seed-digits-4301", _run("--seed", "9" * 4301), 2, ("argument --seed",)),
    Case("seed-huge", _run("--seed", "9" * 40), RAN),
    Case("seed-fullwidth", _run("--seed", "\uff19"), RAN),
    Case("seed-plus", _run("--seed", "+7"), RAN),
    Case("z-nan", _run("--z", "nan"), 2, ("argument --z",)),
    Case("z-inf", _run("--z", "inf"), 2, ("argument --z",)),
    Case("z-zero", _run("--z", "0"), 2, ("argument --z",)),
    Case("z-underflow", _run("--z", "1e-400"), 2, ("argument --z",)),
    Case("z-text", _run("--z", "three"), 2, ("argument --z",)),
    Case("z-tiny", _run("--z", "1e-300"), RAN),
    Case("z-huge", _run("--z", "1e300"), RAN),
    Case("jobs-zero", _run("--jobs", "0"), 2, ("argument --jobs",)),
    Case("jobs-many", _run("--jobs", "100000"), RAN),
    Case("budget-negative", _run("--budget", "-1"), 2, ("argument --budget",)),
    Case("profile-case", _run("--profile", "QUICK"), 2, ("argument --profile",)),
    Case("device-gpu", _run("--device", "gpu"), 2, ("argument --device",)),
    Case("claims-empty", ["run", "--claims", "", "--out", "o"], 2, ("names no claim",)),
    Case("claims-commas", ["run", "--claims", ",,", "--out", "o"], 2, ("names no claim",)),
    Case("claims-unknown", ["run", "--claims", "Q.*", "--out", "o"], 2, ("no claim matches 'Q.*'",)),
    Case("claims-bracket", ["run", "--claims", "[", "--out", "o"], 2, ("no claim matches",)),
    Case("claims-long", ["run", "--claims", "Q" * 100_000, "--out", "o"], 2, ("no claim matches",)),
    Case("claims-repeated", ["run", "--claims", "N.K7,N.K7, N.K7 ", "--out", "o"], RAN),
    Case("show-standalone-text", ["show", ".", "--standalone"], 2, ("--standalone goes with --format latex",)),
    Case("show-format", ["show", ".", "--format", "csv"], 2, ("argument --format",)),
    Case("diff-z", ["diff", ".", ".", "--z", "-1"], 2, ("argument --z",)),
    Case("draws-zero", _prior("dirichlet(alpha=1)", "--draws", "0"), 2, ("argument --draws",)),
    Case("draws-huge", ["prior", "dirichlet(alpha=1)", "--claims", "W.L3", "--draws", "10000000000", "--out", "o"],
         2, ("--draws 10000000000", "more than the audit holds")),
    Case("d-zero", _prior("dirichlet(alpha=1)", "--d", "0"), 2, ("argument --d",)),
    Case("d-one", _prior("dirichlet(alpha=1)", "--d", "1"), 2, ("prior on 1 state",)),
    Case("d-257", _prior("dirichlet(alpha=1)", "--d", "257"), 2, ("at most 256",)),
    Case("d-for-a-point", _prior("point([[0.9, 0.1], [0.2, 0.8]])", "--d", "3"), 2, ("fixed at d = 2",)),
    Case("prior-budget-zero", _prior("dirichlet(alpha=1)", "--budget", "0"), 2, ("argument --budget",)),
    Case("debug-input-error", ["--debug", "run", "--seed", "-1"], 2, ("argument --seed",)),
    Case("resume-without-out", ["run", "--resume"], 2, ("--resume needs --out",)),
    # -- the environment ----------------------------------------------------------------------------
    Case("jobs-env-spaces", _run(), RAN, env={"ICL_VERIFY_JOBS": " 2 "}),
    Case("jobs-env-empty", _run(), RAN, env={"ICL_VERIFY_JOBS": ""}),
    Case("jobs-env-float", _run(), 2, ("ICL_VERIFY_JOBS='2.0'",), env={"ICL_VERIFY_JOBS": "2.0"}),
    Case("jobs-env-negative", _run(), 2, ("ICL_VERIFY_JOBS",), env={"ICL_VERIFY_JOBS": "-1"}),
    Case("jobs-env-overridden", _run("--jobs", "1"), RAN, env={"ICL_VERIFY_JOBS": "nonsense"}),
    Case("timeout-env-text", _prior("s.py:draw"), 2, ("ICL_VERIFY_SAMPLER_TIMEOUT",),
         files=_sampler("np.full((n, 2, 2), 0.5)"), env={"ICL_VERIFY_SAMPLER_TIMEOUT": "soon"}),
    Case("timeout-env-negative", _prior("s.py:draw"), 2, ("ICL_VERIFY_SAMPLER_TIMEOUT",),
         files=_sampler("np.full((n, 2, 2), 0.5)"), env={"ICL_VERIFY_SAMPLER_TIMEOUT": "-5"}),
    Case("timeout-env-huge", _prior("s.py:draw"), 2, ("ICL_VERIFY_SAMPLER_TIMEOUT",),
         files=_sampler("np.full((n, 2, 2), 0.5)"), env={"ICL_VERIFY_SAMPLER_TIMEOUT": "1e300"}),
    Case("timeout-env-inf", _prior("s.py:draw"), 2, ("ICL_VERIFY_SAMPLER_TIMEOUT",),
         files=_sampler("np.full((n, 2, 2), 0.5)"), env={"ICL_VERIFY_SAMPLER_TIMEOUT": "inf"}),
    Case("timeout-env-off", _prior("s.py:draw"), 2, ("--out afile is a file",),
         files=_sampler("np.full((n, 2, 2), 0.5)"), env={"ICL_VERIFY_SAMPLER_TIMEOUT": "0"}),
    # -- the --out and --corpus folders -------------------------------------------------------------
    Case("out-dev-null", ["run", "--claims", "N.K7", "--out", "/dev/null"], 2, ("/dev/null is a file",)),
    Case("out-under-a-file", ["run", "--claims", "N.K7", "--out", "afile/sub"], 2, ("afile",)),
    Case("out-dangling-link", ["run", "--claims", "N.K7", "--out", "dl"], 2, ("is a link to", "does not exist"),
         files={"dl": ("link", "nowhere")}),
    Case("out-link-loop", ["run", "--claims", "N.K7", "--out", "l1"], 2, ("cannot write to --out l1",),
         files={"l1": ("link", "l2"), "l2": ("link", "l1")}),
    Case("out-name-too-long", ["run", "--claims", "N.K7", "--out", "x" * 300], 2, ("cannot write to --out",)),
    Case("out-foreign", _run(), 2, ("not an icl-verify run folder",), files={"o/thesis.tex": "mine"}),
    Case("out-lock-garbage", _run(), RAN, files={"o/.icl-verify.lock": b"\xff\xfe not a pid"}),
    Case("out-results-a-file", _run(), 2, ("o/results is a file",),
         files={"o/run.json": None, "o/results": "x"}),
    Case("out-run-json-a-folder", _run(), 2, ("o/run.json is a folder",), files={"o/run.json": ("dir",)}),
    Case("out-run-json-empty", _run(), 2, ("o/run.json cannot be read as JSON",), files={"o/run.json": ""}),
    Case("out-run-json-utf16", _run(), 2, ("o/run.json", "not UTF-8"),
         files={"o/run.json": '{"a": 1}'.encode("utf-16")}),
    Case("out-run-json-fifo", _run(), 2, ("o/run.json is not a regular file",), files={"o/run.json": ("fifo",)}),
    Case("out-run-json-huge", _run(), 2, ("o/run.json", "more than the 256.0 MiB"),
         files={"o/run.json": ("sparse", 2**29)}),
    Case("corpus-a-file", _run("--corpus", "afile"), RAN),  # said if a FAIL cannot be stored; the run completes
    Case("corpus-new", _run("--corpus", "c/d"), RAN),
    # -- resume ---------------------------------------------------------------------------------------
    Case("resume-empty-folder", ["run", "--resume", "--out", "o"], 2, ("holds no run to resume",),
         files={"o": ("dir",)}),
    Case("resume-no-folder", ["run", "--resume", "--out", "nothing"], 2, ("holds no run to resume",)),
    Case("resume-plugin-missing", ["run", "--resume", "--out", "o"], 2, ("o/run.json: config.claims", "--plugin"),
         files={"o/run.json": "plugin-run"}),
    Case("resume-graph-record", ["run", "--resume", "--out", "o"], 2, ("o/run.json", "graph"),
         files={"o/run.json": "bad-graph-run"}),
    Case("resume-device-cuda", ["run", "--resume", "--out", "o"], 2, ("o/run.json", "CUDA"),
         files={"o/run.json": "cuda-run"}),
    # -- prior specs ----------------------------------------------------------------------------------
    Case("spec-empty", _prior(""), 2, ("empty prior spec",)),
    Case("spec-spaces", _prior("   "), 2, ("empty prior spec",)),
    Case("spec-python", _prior("__import__('os').system('true')"), 2, ("expected a prior name",)),
    Case("spec-lambda", _prior("(lambda: 1)()"), 2, ("prior spec",)),
    Case("spec-unicode-name", _prior("dirichlét(alpha=1)"), 2, ("unknown prior",)),
    Case("spec-fullwidth-digit", _prior("dirichlet(alpha=\uff11)"), 2, ("invalid character",)),
    Case("spec-nan", _prior("dirichlet(alpha=nan)"), 2, ("prior spec",)),
    Case("spec-overflow", _prior("dirichlet(alpha=1e308*10)"), 2, ("must be a finite number",)),
    Case("spec-int-overflow", _prior("dirichlet(alpha=" + "9" * 400 + ")"), 2, ("must be a finite number",)),
    Case("spec-division-by-zero", _prior("dirichlet(alpha=1/0)"), 2, ("division by zero",)),
    Case("spec-tiny-alpha", _prior("dirichlet(alpha=1e-320)"), 2, ("--out afile is a file",)),
    Case("spec-huge-alpha", _prior("dirichlet(alpha=1e300)"), 2, ("--out afile is a file",)),
    Case("spec-weights-huge", _prior("mixture(dirichlet(alpha=1), dirichlet(alpha=2), weights=[1e308, 1e308])"),
         2, ("--out afile is a file",)),
    Case("spec-weights-negative", _prior("mixture(dirichlet(alpha=1), weights=[-1])"), 2, ("weights",)),
    Case("spec-weights-count", _prior("mixture(dirichlet(alpha=1), weights=[1, 2])"), 2, ("1 priors but 2 weights",)),
    Case("spec-point-overflow", _prior("point([[1e308, 1e308], [0.5, 0.5]])"), 2, ("sums to inf",)),
    Case("spec-point-ragged", _prior("point([[0.5, 0.5], [1]])"), 2, ("must be square",)),
    Case("spec-point-257", _prior("point([" + ", ".join(["[" + ", ".join(["1"] + ["0"] * 256) + "]"] * 257) + "])"),
         2, ("longer than 5000",)),
    Case("spec-birkhoff-k", _prior("doubly_stochastic(k=10001, d=3)"), 2, ("more than 10000",)),
    Case("spec-trailing", _prior("dirichlet(alpha=1) x"), 2, ("malformed prior spec",)),
    Case("spec-two", _prior("dirichlet(alpha=1), dirichlet(alpha=2)"), 2, ("prior spec",)),
    Case("spec-surrogate-name", _prior(os.fsdecode(b"dir\xffichlet(alpha=1)")), 2, ("not UTF-8",)),
    Case("spec-nul-free-control", _prior("dirichlet(alpha=1)\x1b[31m"), 2, ("prior spec",)),
    Case("spec-deep-list", _prior("point(" + "[" * 150 + "]" * 150 + ")"), 2, ("levels deep",)),
    # -- samplers -------------------------------------------------------------------------------------
    Case("sampler-complex", _prior("s.py:draw"), 2, ("sampler s.py:draw", "complex"),
         files=_sampler("np.full((n, 2, 2), 0.5 + 0j)")),
    Case("sampler-objects", _prior("s.py:draw"), 2, ("sampler s.py:draw", "not an array of numbers"),
         files=_sampler("np.full((n, 2, 2), 0.5, dtype=object)")),
    Case("sampler-ragged", _prior("s.py:draw"), 2, ("sampler s.py:draw",), files=_sampler("[[[1.0]], [[0.5, 0.5]]]")),
    Case("sampler-huge-entries", _prior("s.py:draw"), 2, ("more than 1",), files=_sampler("np.full((n, 2, 2), 1e308)")),
    Case("sampler-nan", _prior("s.py:draw"), 2, ("is not finite",), files=_sampler("np.full((n, 2, 2), np.nan)")),
    Case("sampler-bool", _prior("s.py:draw"), 2, ("booleans",), files=_sampler("np.ones((n, 1, 1), dtype=bool)")),
    Case("sampler-empty", _prior("s.py:draw"), 2, ("returned shape (1, 0, 0)",), files=_sampler("np.empty((n, 0, 0))")),
    Case("sampler-generator", _prior("s.py:draw"), 2, ("sampler s.py:draw",), files=_sampler("(x for x in [1])")),
    Case("sampler-int-overflow", _prior("s.py:draw"), 2, ("sampler s.py:draw",), files=_sampler("[[[10 ** 400]]]")),
    Case("sampler-base-exception", _prior("s.py:draw"), 2, ("sampler s.py:draw raised Boom",),
         files={"s.py": "class Boom(BaseException):\n    pass\n\ndef draw(rng, n):\n    raise Boom('x')\n"}),
    Case("sampler-generator-exit", _prior("s.py:draw"), 2, ("raised GeneratorExit",),
         files={"s.py": "def draw(rng, n):\n    raise GeneratorExit\n"}),
    Case("sampler-recursion", _prior("s.py:draw"), 2, ("raised RecursionError",),
         files={"s.py": "def draw(rng, n):\n    return draw(rng, n)\n"}),
    Case("sampler-bad-str", _prior("s.py:draw"), 2, ("raised E: (its message cannot be printed)",),
         files={"s.py": "class E(Exception):\n    def __str__(self):\n        raise ValueError\n\n"
                        "def draw(rng, n):\n    raise E()\n"}),
    Case("sampler-folder", _prior("sub:draw"), 2, ("sampler module 'sub' cannot be imported",),
         files={"sub": ("dir",)}),
    Case("sampler-dir-path", _prior("sub/:draw"), 2, ("sampler file sub/ is not a file",), files={"sub": ("dir",)}),
    Case("sampler-txt", _prior("s.txt:draw"), 2, ("s.txt cannot be loaded as Python",),
         files={"s.txt": "def draw(rng, n):\n    pass\n"}),
    Case("sampler-null-bytes", _prior("s.py:draw"), 2, ("sampler file s.py failed to load",),
         files={"s.py": b"def draw(rng, n):\x00\n"}),
    Case("sampler-not-callable", _prior("s.py:draw"), 2, ("draw is a int, not a function",), files={"s.py": "draw = 5\n"}),
    Case("sampler-no-function-name", _prior("s.py:"), 2, ("expected 'module:function'",), files={"s.py": ""}),
    Case("sampler-module-bad-name", _prior("..x:draw"), 2, ("sampler module '..x' cannot be imported",)),
    # -- plugins --------------------------------------------------------------------------------------
    Case("plugin-missing", _run("--plugin", "none.py"), 2, ("claim plugin none.py does not exist",)),
    Case("plugin-folder", _run("--plugin", "sub"), 2, ("claim plugin sub is not a file",), files={"sub": ("dir",)}),
    Case("plugin-device", _run("--plugin", "/dev/zero"), 2, ("/dev/zero is not a file",)),
    Case("plugin-empty", _run("--plugin", "p.py"), 2, ("defines no CLAIMS list",), files={"p.py": ""}),
    Case("plugin-binary", _run("--plugin", "p.py"), 2, ("cannot load claim plugin p.py",),
         files={"p.py": b"\x00\xff\xfe garbage"}),
    Case("plugin-syntax", _run("--plugin", "p.py"), 2, ("cannot load claim plugin p.py", "SyntaxError"),
         files={"p.py": "def (:\n"}),
    Case("plugin-claims-int", _run("--plugin", "p.py"), 2, ("cannot load claim plugin p.py",), files={"p.py": "CLAIMS = 5\n"}),
    Case("plugin-claims-strings", _run("--plugin", "p.py"), 2, ("expected sim.claims.Claim objects",),
         files={"p.py": "CLAIMS = 'abc'\n"}),
    Case("plugin-clash", _run("--plugin", "p.py"), 2, ("clashes with a built-in claim",),
         files={"p.py": OK_PLUGIN.replace("'U.OK'", "'N.K7'")}),
    Case("plugin-keyboard-interrupt-free", ["run", "--plugin", "p.py", "--claims", "U.OK", "--out", "o"], RAN,
         files={"p.py": OK_PLUGIN}),
    Case("plugin-name-not-utf8", ["run", "--plugin", os.fsdecode(b"p\xff.py"), "--claims", "U.OK", "--out", "o"], RAN,
         files={os.fsdecode(b"p\xff.py"): OK_PLUGIN}),
    Case("plugin-twice", ["run", "--plugin", "p.py", "--plugin", "p.py", "--claims", "U.OK", "--out", "o"], RAN,
         files={"p.py": OK_PLUGIN}),
    Case("plugin-base-exception", _run("--plugin", "p.py"), 2, ("cannot load claim plugin p.py", "raised B"),
         files={"p.py": "class B(BaseException):\n    pass\n\nraise B('at import')\n"}),
    Case("list-plugin-exits", ["list", "--plugin", "p.py"], 2, ("called sys.exit(0)",),
         files={"p.py": "import sys\nsys.exit(0)\n"}),
    # -- graphs ---------------------------------------------------------------------------------------
    Case("graph-fifo", ["run", "--graph", "g.json", "--claims", "N.K8", "--out", "o"], 2,
         ("g.json is not a regular file",), files={"g.json": ("fifo",)}),
    Case("graph-folder", ["run", "--graph", "g.json", "--claims", "N.K8", "--out", "o"], 2, ("g.json is a folder",),
         files={"g.json": ("dir",)}),
    Case("graph-huge", ["run", "--graph", "g.txt", "--claims", "N.K8", "--out", "o"], 2, ("more than the 32.0 MiB",),
         files={"g.txt": ("sparse", 2**26)}),
    Case("graph-latin1", ["run", "--graph", "g.txt", "--claims", "N.K8", "--out", "o"], 2, ("not UTF-8",),
         files={"g.txt": "0 1 # caf\xe9\n".encode("latin-1")}),
    Case("graph-bom", ["run", "--graph", "g.json", "--claims", "N.K8", "--out", "o"], 2, ("g.json", "not JSON"),
         files={"g.json": "\ufeff[-1, 0, 1]"}),
    Case("graph-nan", ["run", "--graph", "g.json", "--claims", "N.K8", "--out", "o"], 2, ("a position must be",),
         files={"g.json": "[-1, NaN]"}),
    Case("graph-float-positions", ["run", "--graph", "[-1, 0.0]", "--claims", "N.K8", "--out", "o"], 2,
         ("a position must be",)),
    Case("graph-bool-positions", ["run", "--graph", "[-1, true]", "--claims", "N.K8", "--out", "o"], 2,
         ("a position must be",)),
    Case("graph-huge-position", ["run", "--graph", "[-1, 99999999999999999999999]", "--claims", "N.K8", "--out", "o"],
         2, ("99999999999999999999999 is not a position",)),
    Case("graph-dict-inline", ["run", "--graph", '{"parents": [-1]}', "--claims", "N.K8", "--out", "o"], 2,
         ("T must be an integer",)),
    Case("graph-too-many", ["run", "--graph", "chain:100001", "--claims", "N.K8", "--out", "o"], 2, ("more than 100000",)),
    Case("graph-T-digits", ["run", "--graph", "chain:" + "9" * 5000, "--claims", "N.K8", "--out", "o"], 2,
         ("T must be an integer",)),
    Case("graph-long-name", ["run", "--graph", "x" * 5000, "--claims", "N.K8", "--out", "o"], 2, ("unknown graph",)),
    Case("graph-undirected", ["run", "--graph", "g.graphml", "--claims", "N.K8", "--out", "o"], 2, ("undirected",),
         files={"g.graphml": "undirected-graphml"}),
    Case("graph-graphml-entities", ["run", "--graph", "g.graphml", "--claims", "N.K8", "--out", "o"], 2,
         ("g.graphml",), files={"g.graphml": '<?xml version="1.0"?><!DOCTYPE g [<!ENTITY a "aaaaaaaaaa">'
                                             + "".join(f'<!ENTITY a{k} "{"&a;" * 10 if k == 0 else f"&a{k - 1};" * 10}">'
                                                       for k in range(9)) + ']><graphml>&a8;</graphml>'}),
    Case("graph-nodelink-garbage", ["run", "--graph", "g.json", "--claims", "N.K8", "--out", "o"], 2,
         ("is not an integer position",), files={"g.json": '{"nodes": [{"id": [1]}], "edges": []}'}),
    Case("graph-adjacency-garbage", ["run", "--graph", "g.json", "--claims", "N.K8", "--out", "o"], 2, ("g.json",),
         files={"g.json": '{"adjacency": [[1]], "nodes": [{"id": 0}]}'}),
    Case("graph-childmap-float", ["run", "--graph", "g.json", "--claims", "N.K8", "--out", "o"], 2,
         ("a position must be",), files={"g.json": '{"1": [0.5]}'}),
    Case("graph-for-prior", ["prior", "dirichlet(alpha=1)", "--graph", "[-1, 0, 0]", "--claims", "N.K3", "--out",
                             "afile"], 2, ("query and must be a root",)),
    # -- sweep ----------------------------------------------------------------------------------------
    Case("sweep-out-file", ["sweep", "--out", "afile", "--K", "2", "--seeds", "0", "--set", "steps=5", "--workers", "1"],
         2, ("--out afile is not a folder",)),
    Case("sweep-K-zero", ["sweep", "--out", "sw", "--K", "0"], 2, ("argument --K",)),
    Case("sweep-seeds-text", ["sweep", "--out", "sw", "--seeds", "a,b"], 2, ("argument --seeds",)),
    Case("sweep-set-type", ["sweep", "--out", "sw", "--set", "steps=many"], 2, ("--set steps='many'",)),
    Case("sweep-set-unknown", ["sweep", "--out", "sw", "--set", "stepz=5"], 2, ("unknown run setting 'stepz'",)),
    Case("sweep-set-no-equals", ["sweep", "--out", "sw", "--set", "steps"], 2, ("--set expects KEY=VALUE",)),
    Case("sweep-address-local", ["sweep", "--out", "sw", "--executor", "local", "--address", "tcp://x:1"], 2,
         ("--address is for --executor dask",)),
    # -- reading runs back ----------------------------------------------------------------------------
    Case("show-results-folder", ["show", "r"], 2, ("r/results.json is a folder",), files={"r/results.json": ("dir",)}),
    Case("show-results-fifo", ["show", "r"], 2, ("not a regular file",), files={"r/results.json": ("fifo",)}),
    Case("show-results-huge", ["show", "r"], 2, ("more than the 256.0 MiB",),
         files={"r/results.json": ("sparse", 2**29)}),
    Case("show-results-dangling", ["show", "r"], 2, ("r/results.json", "does not exist"),
         files={"r/results.json": ("link", "nowhere")}),
    Case("show-results-loop", ["show", "r"], 2, ("r/results.json", "symbolic links"),
         files={"r/results.json": ("link", "results.json")}),
    Case("show-results-nan", ["show", "r"], 2, ("NaN, which is not JSON",),
         files={"r/results.json": '{"schema": "icl-verify/results/v1", "x": NaN}'}),
    Case("show-results-bom", ["show", "r"], 2, ("cannot be read as JSON",),
         files={"r/results.json": "\ufeff{}"}),
    Case("show-not-a-folder", ["show", "afile"], 2, ("afile is not a folder",)),
    Case("diff-itself", ["diff", "r", "r"], 0, files={"r": "finished"}),
    Case("list-reports-file", ["list", "--reports", "afile"], 0),
    Case("list-dangling", ["list", "--reports", "rep"], 0, files={"rep/x/results.json": ("link", "nowhere")}),
]


def _make(work, name, what):
    """Write one of a case's files (see :class:`Case`); some names stand for prepared run folders."""
    import json

    path = work / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(what, tuple):
        kind = what[0]
        if kind == "dir":
            path.mkdir(exist_ok=True)
        elif kind == "link":
            os.symlink(what[1], path)
        elif kind == "fifo":
            os.mkfifo(path)
        elif kind == "sparse":
            with open(path, "wb") as fh:
                fh.truncate(what[1])
        return
    if what == "finished":
        res = run_cli(["run", "--claims", "N.K7", "--out", name, "--no-progress"], work, out_dir=name)
        assert res.code == 0, res
        return
    if name.endswith("run.json") and what in (None, "plugin-run", "bad-graph-run", "cuda-run"):
        config = {"profile": "quick", "claims": "N.K7", "seed": 0, "device": "cpu", "prior": None, "z": 3.0,
                  "overrides": {}, "plugins": {}, "graph": None}
        if what == "plugin-run":
            config.update(claims="U.*", plugins={"/elsewhere/mine.py": "0" * 64})
        elif what == "bad-graph-run":
            config.update(claims="N.K8", graph={"name": "g", "nodes": 3, "edges": [[2, 1]]})
        elif what == "cuda-run":
            config.update(device="cuda")
        what = json.dumps({"schema": "icl-verify/run/v1", "run_id": "quick-seed0-x", "config": config,
                           "config_hash": "x", "claims": []})
    if what == "undirected-graphml":
        import networkx as nx

        nx.write_graphml(nx.Graph([(0, 1)]), path)
        return
    if isinstance(what, bytes):
        path.write_bytes(what)
    else:
        path.write_text(what)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_hostile_input_gets_its_exit_and_line(tmp_path, case):
    import torch

    if case.id == "resume-device-cuda" and torch.cuda.is_available():
        pytest.skip("a GPU is present")
    (tmp_path / "afile").write_text("a file where a folder is expected")
    for name, what in case.files.items():
        _make(tmp_path, name, what)
    res = run_cli([*case.argv, "--no-progress"] if case.argv[:1] in (["run"], ["prior"]) else case.argv, tmp_path,
                  env=case.env, out_dir="o" if case.expect == RAN else None)
    if case.expect == RAN:
        assert_finished_run(res, tmp_path / "o")
    elif case.expect == 2:
        new = set(res.new_paths)
        res.new_paths = set()  # compared below: a refused run leaves its inputs as they were
        assert_input_error(res, *case.says)
        assert not new, new
    else:
        assert res.code == case.expect and "Traceback" not in res.err, res


def test_the_table_is_large_and_every_case_names_what_it_expects():
    assert len(CASES) >= 150 and len({c.id for c in CASES}) == len(CASES)
    assert all(c.says for c in CASES if c.expect == 2)
