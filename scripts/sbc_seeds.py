"""How often does the plateau SBC pass its own rule over many seeds? Runs
``calibrate("plateau", sims=SIMS)`` (SBC only, in process) for seeds FIRST .. FIRST + N - 1
and prints each run's uniformity p and coverage per quantity and whether it passes the Holm
rule; a calibrated model fails at most about 5 % of runs.

    python scripts/sbc_seeds.py [FIRST] [N] [SIMS]
"""

from __future__ import annotations

import sys

if __name__ == "__main__":
    from scipy import stats

    from saturation.calibrate import calibrate

    first, n, sims = (int(a) for a in (sys.argv[1:] + ["21", "22", "200"][len(sys.argv) - 1 :])[:3])
    fails, pvalues = 0, {}
    for seed in range(first, first + n):
        table = calibrate("plateau", sims=sims, null_sims=0, power_sims=0, seed=seed, scheduler="sync").table
        fails += int(not table["passes"].all())
        for row in table.itertuples():
            pvalues.setdefault(row.check, []).append(row.p_value)
        cells = " ".join(f"{r.check.removeprefix('SBC ')} {r.p_value:.3f}/{r.value:.3f}" for r in table.itertuples())
        print(f"seed {seed}: {'passes' if table['passes'].all() else 'FAILS'}  (uniformity p / coverage) {cells}")
    share = stats.beta(1 + fails, 1 + n - fails).ppf([0.03, 0.97])
    print(f"runs failing the Holm rule: {fails} of {n} (94 % interval {share[0]:.2f}-{share[1]:.2f})")
    for check, ps in pvalues.items():
        ks = stats.kstest(ps, "uniform").pvalue
        print(f"{check}: its {len(ps)} uniformity p-values against uniform, KS p = {ks:.2f}")
