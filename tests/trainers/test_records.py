"""The typed update record: its fields, its plain-data round trip and the deprecated dict access."""

import math

import pytest
from helpers_trainers import make_record

from trainers.optim.records import FIELD_NAMES, UPDATE_KEYS, UpdateRecord


def test_the_diagnostics_fill_fields_of_the_record_nan_until_measured():
    record = make_record()
    assert set(UPDATE_KEYS) <= set(FIELD_NAMES)
    assert all(math.isnan(record.value(k)) for k in UPDATE_KEYS)
    filled = record.with_fields({"stale_gap": 0.25, "zeta_proxy": 0.5})
    assert (filled.stale_gap, filled.zeta_proxy, filled.kl_tok) == (0.25, 0.5, 0.01)
    assert math.isnan(record.stale_gap)  # frozen: the original is unchanged


def test_the_record_round_trips_through_plain_data_and_ignores_unknown_keys():
    record = make_record(stale_gap=0.1)
    data = record.to_dict()
    assert list(data) == list(FIELD_NAMES) and data["agent"] == "critic"
    again = UpdateRecord.from_dict({**data, "a_key_of_a_later_version": 1})
    assert again.to_dict().keys() == data.keys()
    assert all(
        again.value(k) == data[k] or (math.isnan(data[k]) and math.isnan(again.value(k)))
        for k in FIELD_NAMES
    )


def test_fields_are_read_by_name_and_an_unknown_name_is_refused():
    record = make_record()
    assert record.value("kl_raw") == record.kl_raw == 0.02
    with pytest.raises(TypeError):
        record["kl_raw"]  # type: ignore[index]  # the dict-style access of 0.1.0 is gone
    with pytest.raises(KeyError, match="no field 'nope'"):
        record.value("nope")
