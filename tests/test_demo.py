"""The demo says which released ratios are noise (from release.accuracy(): no data read)."""

import polars as pl

from dpframe.demo import run_demo


def test_demo_names_the_groups_whose_ratios_are_noise(tmp_path):
    result = run_demo(tmp_path / "demo", n=5_000)
    released, accuracy = result.released["by_region"], result.by_region_accuracy
    keys = ["region", "age_band"]
    assert accuracy.select(keys).equals(released.select(keys))
    # the Islands are empty in the survey: their means and covariances are noise
    islands = accuracy.filter(pl.col("region") == "Islands")
    assert islands["satisfaction_trust_uninformative"].all()  # threshold ~1,700 records
    assert islands["income_mean_uninformative"].any()  # threshold ~54: Ñ above it ~1%
    notes = {n.split(" for ")[1].split(":")[0]: n for n in result.noise_notes}
    assert set(notes) == {"income_mean", "satisfaction_trust"}
    flagged = accuracy["satisfaction_trust_uninformative"].sum()  # all 18 at 5,000 rows
    assert notes["satisfaction_trust"].startswith(f"{flagged} of 18 groups (")
    assert "Islands" in notes["income_mean"]  # the other groups hold 100+ respondents
    assert "pure noise where the noisy count is <= 0" in notes["income_mean"]
