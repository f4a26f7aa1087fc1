# Two entry points for a fresh machine (see README):
#   make report   set up .venv and write a verification report under reports/
#   make test     set up .venv and run the test suite (it builds the docs too)
# and the docs site:
#   make docs     set up .venv and build docs/_build/html (warnings are errors)
VENV ?= .venv
PYTHON ?= python3
PROFILE ?= quick
# more options for `make report`, e.g. RUN_ARGS="--claims 'W.*' --seed 3"
RUN_ARGS ?=
BIN := $(VENV)/bin
DOCS_OUT ?= docs/_build/html

.PHONY: report test bench setup clean mutate mutate-claims docs docs-html

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check torch==2.13.0
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[test,docs]'
	touch $@

# icl-verify exits 0 (no FAIL), 1 (a claim FAILed: a finished run, reported), 2 (usage or input error)
# or 3 (internal error: a crashed check or a bug). Only 1 is turned into success here.
report: setup
	@$(BIN)/icl-verify run --profile $(PROFILE) $(RUN_ARGS); status=$$?; \
	if [ $$status -eq 1 ]; then echo "make report: the run finished; some claims FAILED (see the report above)"; \
	exit 0; fi; exit $$status

test: setup
	$(BIN)/python -m pytest -n 2

# The docs site: tutorials, the claim catalogue (from the claim registry), the CLI reference (from
# the argument parser) and the API reference (from the docstrings). -W: a warning (a broken
# cross-reference, a public name without a docstring) fails the build.
docs: setup
	@$(MAKE) --no-print-directory docs-html

docs-html:
	$(BIN)/sphinx-build -q -W --keep-going -b html docs $(DOCS_OUT)
	@echo "docs built: open $(abspath $(DOCS_OUT))/index.html"

bench: setup
	$(BIN)/python -m benchmarks

# Mutation testing (too slow for CI; see docs/mutation.md): mutmut mutates theory/ and the verdict
# logic (config: [tool.mutmut] in pyproject.toml) and runs, per mutant, the mirrored fast tests that
# reach the mutated function, on one worker. MUTATE_SCOPE takes mutmut's mutant-name globs, e.g.
#   make mutate MUTATE_SCOPE='theory.markov.*'
# Score = (killed + timeout) / checked; a mutant no selected test reaches counts against it.
MUTATE_SCOPE ?= theory.* sim.claims.base.x_summarize_instances__mutmut_* sim.claims.base.x_property_tier__mutmut_* \
	$(foreach f,tier_verdict combine_verdicts compare guard_with_controls margin_multiplier welch_df headline,\
	sim.verdict.x_$(f)__mutmut_*)
empty :=
space := $(empty) $(empty)
MUTATE_RE := ^($(subst $(space),|,$(subst *,.*,$(strip $(MUTATE_SCOPE)))))$$

$(VENV)/.mutate-installed: $(VENV)/.installed pyproject.toml
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[test,mutate]'
	touch $@

# Prints each survivor among the mutants named by $(1) (a regular expression) and the score.
define mutate_score
$(abspath $(BIN))/mutmut results --all true | sed 's/^ *//' | awk -F': ' -v re='$(1)' \
	'$$1 ~ re && $$2 != "not checked" && $$2 != "skipped" { n++; c[$$2]++; \
	 if ($$2 != "killed" && $$2 != "timeout") print "survivor (" $$2 "): " $$1 } \
	 END { k = c["killed"] + c["timeout"]; \
	       printf "mutation score: %d of %d killed = %.1f%%\n", k, n, n ? 100 * k / n : 0 }'
endef

mutate: $(VENV)/.mutate-installed
	OMP_NUM_THREADS=1 $(BIN)/mutmut run --max-children 1 $(foreach p,$(MUTATE_SCOPE),'$(p)') > mutants-run.log 2>&1 \
		|| { tail -c 4000 mutants-run.log; exit 1; }
	@$(call mutate_score,$(MUTATE_RE))

# The claims' pure decision helpers (docs/mutation.md) have a pass of their own: the tests that
# reach them are claim tests of seconds, which [tool.mutmut]'s selection would otherwise also run
# for every theory/ mutant they reach. It runs in a copy of the sources, MUTATE_CLAIMS_DIR, whose
# pyproject.toml has [tool.icl_verify.mutmut_claims] as its [tool.mutmut] (mutmut reads only that
# table); mutmut's results stay there between runs. MUTATE_CLAIMS_SCOPE: mutant-name globs.
MUTATE_CLAIMS_DIR ?= build/mutate-claims
MUTATE_CLAIMS_SCOPE ?= sim.montecarlo.* sim.sequential.* \
	sim.papers.wei.claims.construction.x_decide_tv_limit__mutmut_* \
	sim.papers.wei.claims.continuous.x_decide_gap__mutmut_* \
	$(foreach f,_segment_gap _map_exponent_outcome _rate_check decide_rate,\
	sim.papers.wei.claims.identifiability.x_$(f)__mutmut_*) \
	sim.papers.wei.claims.continuous_trained.x_decide_w_p2_trained__mutmut_* \
	sim.papers.wei.claims.dynamics.x_decide_gradient__mutmut_* \
	sim.papers.wei.claims.trained.x_decide_w_e1__mutmut_* sim.papers.wei.claims.trained.x_decide_w_e2__mutmut_* \
	sim.papers.nichani.claims.reporting.x_across_seeds__mutmut_* \
	sim.papers.nichani.claims.constructions.x__segment__mutmut_* \
	sim.papers.nichani.claims.experiments.x_family_outcome__mutmut_* \
	sim.papers.nichani.claims.gradient.x__jackknife__mutmut_* \
	sim.papers.nichani.claims.trained.x_k1_decision__mutmut_* \
	sim.papers.markov.claims.edelman.x_judge_stages__mutmut_* sim.papers.markov.claims.edelman.x_decide_e1__mutmut_* \
	sim.papers.markov.claims.gibson.x_decide_g1__mutmut_* sim.papers.markov.claims.gibson.x_judge_law__mutmut_* \
	sim.papers.markov.placement.x_judge_end__mutmut_*
MUTATE_CLAIMS_RE := ^($(subst $(space),|,$(subst *,.*,$(strip $(MUTATE_CLAIMS_SCOPE)))))$$

# pyproject.toml with [tool.icl_verify.mutmut_claims] as its [tool.mutmut] (JSON strings and
# lists of them are valid TOML)
define MUTMUT_CLAIMS_PYPROJECT
import json, re, sys, tomllib
text = open(sys.argv[1]).read()
table = tomllib.loads(text)["tool"]["icl_verify"]["mutmut_claims"]
for name in (r"tool\.mutmut", r"tool\.icl_verify\.mutmut_claims"):
    text = re.sub(rf"^\[{name}\]\n(?:(?!\[).*\n?)*", "", text, flags=re.M)
print("# written by make mutate-claims from the project's pyproject.toml\n" + text + "\n[tool.mutmut]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in table.items()), end="")
endef
export MUTMUT_CLAIMS_PYPROJECT

mutate-claims: $(VENV)/.mutate-installed
	mkdir -p $(MUTATE_CLAIMS_DIR)
	rm -rf $(addprefix $(MUTATE_CLAIMS_DIR)/,theory sim tests benchmarks)
	cp -a theory sim tests benchmarks $(MUTATE_CLAIMS_DIR)/
	$(BIN)/python -c "$$MUTMUT_CLAIMS_PYPROJECT" pyproject.toml > $(MUTATE_CLAIMS_DIR)/pyproject.toml
	cd $(MUTATE_CLAIMS_DIR) && OMP_NUM_THREADS=1 $(abspath $(BIN))/mutmut run --max-children 1 \
		$(foreach p,$(MUTATE_CLAIMS_SCOPE),'$(p)') > mutants-run.log 2>&1 || { tail -c 4000 mutants-run.log; exit 1; }
	@cd $(MUTATE_CLAIMS_DIR) && $(call mutate_score,$(MUTATE_CLAIMS_RE))

clean:
	rm -rf $(VENV) build *.egg-info mutants mutants-run.log docs/_build docs/_generated
