"""Budget amounts as people write them, and the message each bad one gets (contract/budget.py)."""

import pytest

from torchscan_lsp.contract.budget import budget_problems, parse_amount, parse_budget, parse_max_increase


@pytest.mark.parametrize("key, written, value", [
    ("params", "25M", 25 * 10**6),
    ("params", "1.5k params", 1500),
    ("params", 25_000_000, 25 * 10**6),
    ("flops", "4.1 GFLOPs", 41 * 10**8),          # 4.1 · 10^9, exactly (no float rounding)
    ("flops", "800M", 8 * 10**8),
    ("macs", "2 GMACs", 2 * 10**9),
    ("peak_memory", "2 GiB", 2 * 2**30),
    ("peak_memory", "512 MB", 512 * 10**6),
    ("latency", "5 ms", 0.005),
    ("latency", "250 µs", 250e-6),
    ("latency", "250 us", 250e-6),
    ("train_memory", "24 GiB", 24 * 2**30),
])
def test_each_budget_key_reads_its_amounts(key, written, value):
    amount = parse_budget({key: written})[key]
    assert amount.value == pytest.approx(value, rel=1e-12) and not amount.relative
    assert amount.text == (written if isinstance(written, str) else repr(written))


def test_a_growth_limit_is_a_share_or_an_amount():
    limits = parse_max_increase({"flops": "5 %", "params": "100k", "macs": "0.5%"})
    assert (limits["flops"].value, limits["flops"].relative) == (0.05, True)
    assert (limits["params"].value, limits["params"].relative) == (100_000, False)
    assert limits["macs"].value == pytest.approx(0.005)


@pytest.mark.parametrize("value, message", [
    ({"flops": "4.1 GMACs"},
     "budget 'flops': '4.1 GMACs' is not an amount (that is MACs, not FLOPs); expected \"4.1 GFLOPs\", "
     "\"800 MFLOPs\" or 4100000000."),
    ({"params": "lots"}, "budget 'params': 'lots' is not an amount; expected \"25M\", \"1.5k params\" or 25000000."),
    ({"params": 0}, "budget 'params': expected a positive amount, got 0."),
    ({"macs": -5}, "budget 'macs': expected a positive amount, got -5."),
    ({"latency": 5}, "budget 'latency': 5 has no unit; expected \"5 ms\", \"250 µs\" or \"0.5 s\"."),
    ({"latency": "5 minutes"},
     "budget 'latency': '5 minutes' is not a duration with its unit; expected \"5 ms\", \"250 µs\" or \"0.5 s\"."),
    ({"peak_memory": "2 Gb!"},
     "budget 'peak_memory': '2 Gb!' is not a size; write e.g. \"24 GiB\", \"80 GB\" or \"512 MiB\"."),
    ({"train_memory": True},
     "budget 'train_memory': expected a number or a string, got bool; expected \"24 GiB\" or \"80 GB\"."),
    ({"params": "5 %"},
     "budget 'params': '5 %': a share of the baseline belongs in max_increase; expected \"25M\", "
     "\"1.5k params\" or 25000000."),
    ({"flop": 1}, "unknown budget key 'flop' (did you mean 'flops'?); budget keys: params, flops, macs, "
                  "peak_memory, latency, train_memory"),
    (["params", "25M"], "budget must be a dict such as {\"params\": \"25M\", \"flops\": \"4.1 GFLOPs\"}, got list."),
])
def test_each_bad_budget_says_what_to_write(value, message):
    with pytest.raises((TypeError, ValueError)) as raised:
        parse_budget(value)
    assert str(raised.value) == message


def test_a_growth_limit_on_a_measured_metric_points_to_budget():
    with pytest.raises(ValueError) as raised:
        parse_max_increase({"latency": "5 %"})
    assert str(raised.value) == (
        "max_increase 'latency': only params, flops, macs are compared with the baseline (the baseline is "
        "analysed, never measured); put a limit on latency in budget instead")
    with pytest.raises(ValueError, match=r"^max_increase 'flops': 'x%': a share is a number and %"):
        parse_max_increase({"flops": "x%"})


def test_every_problem_of_a_table_at_once():
    problems = budget_problems("budget", {"flops": "x", "params": "1M", "lat": 3})
    assert [key for key, _ in problems] == ["flops", "lat"]
    assert problems[1][1].startswith("unknown budget key 'lat' (did you mean 'latency'?)")


def test_an_amount_alone():
    assert parse_amount("flops", 1e9).value == 1e9
    assert parse_amount("params", "3", option="max_increase", relative=True).relative is False


def test_two_bad_keys_of_one_option_are_one_error_naming_both():
    with pytest.raises(ValueError) as raised:
        parse_budget({"flop": 1, "params": "lots"})
    assert str(raised.value) == (
        "unknown budget key 'flop' (did you mean 'flops'?); budget keys: params, flops, macs, peak_memory, "
        "latency, train_memory; budget 'params': 'lots' is not an amount; expected \"25M\", \"1.5k params\" or "
        "25000000.")
    with pytest.raises(ValueError, match=r"^max_increase 'flops': 'x%'.*; unknown max_increase key 'param'"):
        parse_max_increase({"flops": "x%", "param": "5%"})
