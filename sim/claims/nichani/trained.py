"""Placeholders for N's claims that no tier decides yet: the trained claims N.K1, N.K4, N.E
(issue #4) and the prior audit N.K10 (issue #5). Each is in every report, NOT_RUN, with
the reason and where it will be decided (``Claim.pending``)."""
from __future__ import annotations

from ..base import Claim, Source

__all__ = ["N_K1", "N_K4", "N_K10", "N_E", "CLAIMS"]

_TRAINED_PENDING = "trained tier not built yet (issue #4); decided by the trained tier in the quick profile once built"

N_K1 = Claim(
    id="N.K1",
    title="Two-stage gradient descent on the reduced model recovers the graph and approaches L*",
    source=Source("N", "Knowl 1 (Theorem 4.4); algorithm Knowl 5",
                  "S(A1)_{i,p(i)} >= 1 - O(1/T); L(theta) - L* <= C (log^2 T / T_eff)^(c gamma / 24)"),
    statement=("Two-stage gradient descent on N's reduced model (A1(0) = 0, A2(0) = beta0 I; stage 1 trains A1 with A2 "
               "frozen, stage 2 trains A2) on N's perturbed population loss: for every non-root i the first layer's "
               "attention S(A1)_{i,p(i)} >= 1 - O(1/T), and the loss approaches L* = E[entropy rate] as T_eff "
               "grows. To be decided by the trained tier (issue #4)."),
    assumptions=("lower bound gamma > 0", "non-degeneracy", "permutation symmetry and uniform mean",
                 "root fraction <= 1 - gamma", "T_eff >= poly(1/gamma, S)", "beta0 <= c T_eff^(-3/2)"),
    checks={},
    settings={},
    decided_by="quick",
    pending=_TRAINED_PENDING,
)

N_K4 = Claim(
    id="N.K4",
    title="The trained model generalises out of distribution",
    source=Source("N", "Knowl 4 (Theorem 4.5)",
                  "min pi~ >= gamma/S => sup_s' |f(s_{1:T})_s' - pi~(s'|s_T)| <= C log T / T_eff^(c gamma) w.p. 0.99"),
    statement=("The model trained by two-stage gradient descent, evaluated on prompts drawn from a transition matrix "
               "outside the prior's support with min entry >= gamma/S, predicts pi~(.|s_T) with an error that "
               "shrinks with T_eff as in distribution. To be decided by the trained tier (issue #4)."),
    assumptions=("min pi~ >= gamma/S", "the model trained as in N.K1"),
    checks={},
    settings={},
    decided_by="quick",
    pending=_TRAINED_PENDING,
)

N_K10 = Claim(
    id="N.K10",
    title="N's assumptions on the prior, audited for any prior",
    source=Source("N", "Knowl 10",
                  "min pi > gamma/S; sum_s ||pi(.|s) - mu||^2 >= gamma^2/S; permutation symmetry and E[pi] = 11^T/S; "
                  "|R|/T <= 1 - gamma; T_eff >= poly(1/gamma, S)"),
    statement=("For a prior a user gives: the transition lower bound, non-degeneracy, permutation symmetry with "
               "uniform mean, the root fraction and T_eff, each checked (exactly or by Monte Carlo with error bars) "
               "and mapped to the claims it feeds (N.K1, N.K3, N.K4). Decided by `icl-verify prior` (issue #5)."),
    assumptions=(),
    checks={},
    settings={},
    decided_by="quick",
    pending="decided by `icl-verify prior` (issue #5)",
)

N_E = Claim(
    id="N.E",
    title="N Fig. 2: trained first layers match the adjacency matrix; the loss approaches the Bayes loss",
    source=Source("N", "Section 3.1, Fig. 2; reference code single_parent.py",
                  "trained on chain, in-context-function and random-tree DAGs, A1 matches the adjacency matrix"),
    statement=("Trained (all blocks jointly, from zero, plain gradient descent as N's code) on chain, in-context "
               "function and random-tree DAGs (S=10, T=20, Dirichlet(0.1)): the first layer's attention puts its mass "
               "on each position's parent and the loss approaches the Bayes loss (add-alpha with edges only; N's "
               "plotted line counts roots as children of s_(T-2), see N.T). To be decided by the trained tier "
               "(issue #4)."),
    assumptions=(),
    checks={},
    settings={},
    decided_by="quick",
    pending=_TRAINED_PENDING,
)

CLAIMS = [N_K1, N_K4, N_K10, N_E]
