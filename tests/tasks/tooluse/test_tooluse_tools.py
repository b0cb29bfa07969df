"""The pure rules of ToolUse: database hashing, tools, validation, atomicity, the calculator."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tasks.tooluse.calculator import CalculationError, calculate
from tasks.tooluse.db import DatabaseError, canonical_hash, copy_db, load_db
from tasks.tooluse.toolbox import Tool, ToolBox
from tasks.tooluse.tools import TOOL_NAMES, TOOLS, WRITE_TOOL_NAMES, make_toolbox, tool_schemas

DB = load_db()


@pytest.fixture
def db() -> dict[str, Any]:
    return copy_db(DB)


# -- the database ---------------------------------------------------------------------------------
def test_shipped_database_is_consistent() -> None:
    assert set(DB) == {"users", "products", "orders"}
    for order_id, order in DB["orders"].items():
        assert order["order_id"] == order_id
        assert order_id in DB["users"][order["user_id"]]["orders"]
        total = round(sum(item["price"] for item in order["items"]), 2)
        assert order["payment_history"][0]["amount"] == total
        for item in order["items"]:
            assert item["item_id"] in DB["products"][item["product_id"]]["variants"]


def test_hash_ignores_key_order_but_not_values_or_list_order() -> None:
    a = {"users": {"x": {"a": 1, "b": [1, 2]}}, "products": {}, "orders": {}}
    b = {"orders": {}, "products": {}, "users": {"x": {"b": [1, 2], "a": 1}}}
    assert canonical_hash(a) == canonical_hash(b)
    assert canonical_hash(a) != canonical_hash({**a, "users": {"x": {"a": 1, "b": [2, 1]}}})
    assert canonical_hash(a) != canonical_hash({**a, "users": {"x": {"a": 2, "b": [1, 2]}}})


def test_copy_is_deep(db: dict[str, Any]) -> None:
    db["users"]["ada_park_1001"]["payment_methods"]["gift_card_7001002"]["balance"] = 0
    assert DB["users"]["ada_park_1001"]["payment_methods"]["gift_card_7001002"]["balance"] == 50.0


def test_load_db_errors_name_the_file(tmp_path: Any) -> None:
    with pytest.raises(DatabaseError, match=r"users\.json: not found"):
        load_db(tmp_path)
    for table in ("users", "products", "orders"):
        (tmp_path / f"{table}.json").write_text("{}")
    (tmp_path / "orders.json").write_text("[1, 2]")
    with pytest.raises(DatabaseError, match=r"orders\.json: expected a JSON object"):
        load_db(tmp_path)


# -- schemas --------------------------------------------------------------------------------------
def test_schemas_are_in_tau_format_and_closed() -> None:
    schemas = tool_schemas()
    assert len(schemas) == len(TOOLS) + 1 == 17
    for schema in schemas:
        assert schema["type"] == "function"
        function = schema["function"]
        assert set(function) == {"name", "description", "parameters"}
        params = function["parameters"]
        assert params["type"] == "object" and params["additionalProperties"] is False
        assert set(params["required"]) <= set(params["properties"])
    assert schemas[-1]["function"]["name"] == "respond"
    json.dumps(schemas)  # JSON-serialisable


# -- every tool: one success and one refusal ----------------------------------------------------
SUCCESSES = [
    ("find_user_id_by_email", {"email": "ADA.park@example.com"}, "ada_park_1001"),
    (
        "find_user_id_by_name_zip",
        {"first_name": "chloe", "last_name": "MARTIN", "zip": "78701"},
        "chloe_martin_1003",
    ),
    ("get_user_details", {"user_id": "diego_silva_1004"}, '"email": "diego.silva@example.com"'),
    ("get_order_details", {"order_id": "#W5002002"}, '"status": "processed"'),
    ("get_product_details", {"product_id": "3201000003"}, '"name": "Desk Lamp"'),
    ("list_all_product_types", {}, '"Backpack": "3201000005"'),
    ("calculate", {"expression": "(35.8 - 31.2) * 2"}, "9.2"),
    ("think", {"thought": "hmm"}, ""),
    ("transfer_to_human_agents", {"summary": "angry"}, "Transfer successful"),
]


@pytest.mark.parametrize(("name", "args", "expected"), SUCCESSES)
def test_read_tools_answer_and_change_nothing(
    db: dict[str, Any], name: str, args: dict[str, Any], expected: str
) -> None:
    before = canonical_hash(db)
    outcome = make_toolbox().execute(db, name, args)
    assert outcome.ok, outcome.text
    assert expected in outcome.text
    assert canonical_hash(db) == before
    assert outcome.terminal == (name == "transfer_to_human_agents")


def test_not_found_errors(db: dict[str, Any]) -> None:
    box = make_toolbox()
    for name, args in [
        ("find_user_id_by_email", {"email": "nobody@example.com"}),
        ("find_user_id_by_name_zip", {"first_name": "Ada", "last_name": "Park", "zip": "00000"}),
        ("get_user_details", {"user_id": "nobody"}),
        ("get_order_details", {"order_id": "W5001001"}),  # the '#' matters
        ("get_product_details", {"product_id": "4101000001"}),  # an item id, not a product id
    ]:
        outcome = box.execute(db, name, args)
        assert outcome.outcome == "tool_error" and outcome.text.startswith("Error:"), name


def test_cancel_refunds_gift_card_at_once(db: dict[str, Any]) -> None:
    out = make_toolbox().execute(
        db, "cancel_pending_order", {"order_id": "#W5003001", "reason": "ordered by mistake"}
    )
    assert out.ok
    order = db["orders"]["#W5003001"]
    assert order["status"] == "cancelled" and order["cancel_reason"] == "ordered by mistake"
    assert order["payment_history"][-1] == {
        "transaction_type": "refund",
        "amount": 80.25,
        "payment_method_id": "gift_card_7003001",
    }
    card = db["users"]["chloe_martin_1003"]["payment_methods"]["gift_card_7003001"]
    assert card["balance"] == 200.75


def test_modify_items_handles_duplicates_and_locks_the_order(db: dict[str, Any]) -> None:
    box = make_toolbox()
    args = {
        "order_id": "#W5006002",
        "item_ids": ["4106000001", "4106000001"],
        "new_item_ids": ["4106000002", "4106000002"],
        "payment_method_id": "paypal_7006002",
    }
    assert box.execute(db, "modify_pending_order_items", args).ok
    order = db["orders"]["#W5006002"]
    assert [i["item_id"] for i in order["items"]] == ["4106000002", "4106000002", "4105000003"]
    assert order["items"][0]["options"]["color"] == "blue"
    assert order["status"] == "pending (item modified)"
    again = box.execute(db, "modify_pending_order_items", args)
    assert again.outcome == "tool_error"  # only once per order


def test_exchange_records_price_difference(db: dict[str, Any]) -> None:
    out = make_toolbox().execute(
        db,
        "exchange_delivered_order_items",
        {
            "order_id": "#W5003002",
            "item_ids": ["4102000002"],
            "new_item_ids": ["4102000001"],
            "payment_method_id": "credit_card_7003002",
        },
    )
    assert out.ok
    order = db["orders"]["#W5003002"]
    assert order["status"] == "exchange requested"
    assert order["exchange_price_difference"] == -4.6


WRITE_REFUSALS = [
    ("cancel_pending_order", {"order_id": "#W5002002", "reason": "no longer needed"}),  # processed
    (
        "modify_pending_order_address",
        {
            "order_id": "#W5001002",  # delivered
            "address1": "a",
            "address2": "",
            "city": "c",
            "state": "s",
            "country": "USA",
            "zip": "1",
        },
    ),
    (
        "modify_pending_order_items",
        {
            "order_id": "#W5001001",
            "item_ids": ["4101000001"],
            "new_item_ids": ["4101000005"],  # unavailable
            "payment_method_id": "credit_card_7001001",
        },
    ),
    (
        "modify_pending_order_payment",
        {"order_id": "#W5002001", "payment_method_id": "paypal_7002001"},
    ),
    (
        "modify_user_address",
        {
            "user_id": "nobody",
            "address1": "a",
            "address2": "",
            "city": "c",
            "state": "s",
            "country": "USA",
            "zip": "1",
        },
    ),
    (
        "return_delivered_order_items",
        {
            "order_id": "#W5004001",
            "item_ids": ["4104000003"],
            "payment_method_id": "credit_card_7001001",  # not the user's
        },
    ),
    (
        "exchange_delivered_order_items",
        {
            "order_id": "#W5004001",
            "item_ids": ["4104000003"],
            "new_item_ids": ["4105000001"],  # another product type
            "payment_method_id": "paypal_7004001",
        },
    ),
]


@pytest.mark.parametrize(("name", "args"), WRITE_REFUSALS, ids=[w[0] for w in WRITE_REFUSALS])
def test_refused_writes_leave_the_database_unchanged(
    db: dict[str, Any], name: str, args: dict[str, Any]
) -> None:
    before = canonical_hash(db)
    outcome = make_toolbox().execute(db, name, args)
    assert outcome.outcome == "tool_error", outcome.text
    assert canonical_hash(db) == before


def test_every_write_tool_is_covered() -> None:
    assert {w[0] for w in WRITE_REFUSALS} == WRITE_TOOL_NAMES


# -- invalid calls: rejected before running, database untouched -------------------------------------
INVALID_CALLS = [
    ("wrong type", "cancel_pending_order", {"order_id": 5001001, "reason": "no longer needed"}),
    (
        "wrong array type",
        "return_delivered_order_items",
        {"order_id": "#W5004001", "item_ids": "4104000003", "payment_method_id": "paypal_7004001"},
    ),
    (
        "extra field",
        "cancel_pending_order",
        {"order_id": "#W5001001", "reason": "no longer needed", "force": True},
    ),
    ("missing field", "cancel_pending_order", {"order_id": "#W5001001"}),
    ("not in enum", "cancel_pending_order", {"order_id": "#W5001001", "reason": "because"}),
    ("unknown tool", "drop_all_orders", {}),
    ("arguments not an object", "get_order_details", ["#W5001001"]),
    (
        "sql injection",
        "cancel_pending_order",
        {"order_id": "#W5001001'; DROP TABLE orders; --", "reason": "no longer needed"},
    ),
    ("path string", "get_order_details", {"order_id": "../../../../etc/passwd"}),
    (
        "path in write",
        "modify_user_address",
        {
            "user_id": "/etc/shadow",
            "address1": "~/.ssh/id_rsa",
            "address2": "",
            "city": "c",
            "state": "s",
            "country": "USA",
            "zip": "1",
        },
    ),
    ("1 MB payload", "think", {"thought": "x" * 1_000_000}),
    (
        "1 MB list",
        "return_delivered_order_items",
        {
            "order_id": "#W5004001",
            "item_ids": ["4104000003"] * 100_000,
            "payment_method_id": "paypal_7004001",
        },
    ),
    ("too long string", "get_order_details", {"order_id": "#W" + "1" * 100}),
    ("deep nesting", "think", {"thought": json.loads("[" * 60 + "]" * 60)}),
]


@pytest.mark.parametrize(("what", "name", "args"), INVALID_CALLS, ids=[c[0] for c in INVALID_CALLS])
def test_invalid_calls_are_errors_and_change_nothing(
    db: dict[str, Any], what: str, name: str, args: Any
) -> None:
    before = canonical_hash(db)
    outcome = make_toolbox().execute(db, name, args)
    assert not outcome.ok
    assert outcome.text.startswith("Error")
    assert len(outcome.text) < 1000  # the payload is never echoed back
    assert canonical_hash(db) == before


def test_invalid_call_kinds_and_messages(db: dict[str, Any]) -> None:
    box = make_toolbox()
    unknown = box.execute(db, "drop_all_orders", {})
    assert unknown.outcome == "unknown_tool" and "cancel_pending_order" in unknown.text
    extra = box.execute(db, "get_user_details", {"user_id": "x", "admin": True})
    assert extra.outcome == "invalid"
    assert "Additional properties are not allowed ('admin'" in extra.text
    missing = box.execute(db, "cancel_pending_order", {})
    assert "'order_id' is a required property" in missing.text
    assert "'reason' is a required property" in missing.text  # every problem at once
    big = box.execute(db, "think", {"thought": "x" * 1_000_000})
    assert "the limit is 8192" in big.text


def test_tool_that_crashes_after_writing_is_rolled_back(db: dict[str, Any]) -> None:
    def half_write(data: Any, order_id: str) -> str:
        data["orders"][order_id]["status"] = "cancelled"
        data["users"]["ada_park_1001"]["email"] = "evil@example.com"
        data["users"]["new_user"] = {"user_id": "new_user"}
        raise RuntimeError("boom")

    def write_then_error(data: Any, order_id: str) -> str:
        data["orders"][order_id]["status"] = "cancelled"
        return "Error: changed my mind"

    def iterate(data: Any, order_id: str) -> str:
        for order in data["orders"].values():  # not offered inside a transaction
            order["status"] = "cancelled"
        return "done"

    props = {"order_id": {"type": "string"}}
    box = ToolBox(
        [
            Tool("half_write", "test", props, ("order_id",), half_write, writes=True),
            Tool("write_then_error", "test", props, ("order_id",), write_then_error, writes=True),
            Tool("iterate", "test", props, ("order_id",), iterate, writes=True),
        ]
    )
    before = canonical_hash(db)
    crashed = box.execute(db, "half_write", {"order_id": "#W5001001"})
    assert crashed.outcome == "tool_error" and "RuntimeError: boom" in crashed.text
    assert canonical_hash(db) == before
    assert box.execute(db, "write_then_error", {"order_id": "#W5001001"}).outcome == "tool_error"
    assert box.execute(db, "iterate", {"order_id": "#W5001001"}).outcome == "tool_error"
    assert canonical_hash(db) == before


def test_successful_write_is_committed(db: dict[str, Any]) -> None:
    before = canonical_hash(db)
    out = make_toolbox().execute(
        db, "cancel_pending_order", {"order_id": "#W5001001", "reason": "no longer needed"}
    )
    assert out.ok and canonical_hash(db) != before
    assert db["orders"]["#W5001001"]["status"] == "cancelled"
    # exactly the same database as a plain, non-transactional application of the change
    expected = copy_db(DB)
    expected["orders"]["#W5001001"]["status"] = "cancelled"
    expected["orders"]["#W5001001"]["cancel_reason"] = "no longer needed"
    expected["orders"]["#W5001001"]["payment_history"].append(
        {"transaction_type": "refund", "amount": 36.5, "payment_method_id": "credit_card_7001001"}
    )
    assert canonical_hash(db) == canonical_hash(expected)
    assert DB["orders"]["#W5001001"]["status"] == "pending"  # the loaded store is untouched


def test_tool_names() -> None:
    assert "respond" not in TOOL_NAMES
    assert len(TOOL_NAMES) == 16


# -- the calculator ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("expression", "value"),
    [("2 + 2", 4.0), ("-(3 * (2 + 1)) / 2", -4.5), (".5 + 1.", 1.5), ("2 - -3", 5.0), ("7", 7.0)],
)
def test_calculator_values(expression: str, value: float) -> None:
    assert calculate(expression) == value


@pytest.mark.parametrize(
    "expression",
    [
        "__import__('os').system('ls')",
        "2 ** 3",
        "1e308 * 10",
        "1 / 0",
        "(1 + 2",
        "1 + 2)",
        "",
        "(" * 40 + "1" + ")" * 40,
        "9" * 300,
        "open('/etc/passwd')",
        "2 3",
    ],
)
def test_calculator_rejects_everything_else(expression: str) -> None:
    with pytest.raises(CalculationError):
        calculate(expression)


@pytest.mark.parametrize(
    ("expression", "digit"),
    [
        ("١٢٣+1", "'١' (U+0661 ARABIC-INDIC DIGIT ONE)"),  # issue #15: was 124.0
        ("1 + ２", "'２' (U+FF12 FULLWIDTH DIGIT TWO)"),
        ("2.५", "'५' (U+096B DEVANAGARI DIGIT FIVE)"),
        ("𝟕 * 2", "'𝟕' (U+1D7D5 MATHEMATICAL BOLD DIGIT SEVEN)"),
    ],
)
def test_calculator_rejects_non_ascii_digits_by_name(expression: str, digit: str) -> None:
    with pytest.raises(CalculationError) as err:
        calculate(expression)
    assert str(err.value) == (
        f"non-ASCII digit {digit} in expression: write numbers with the ASCII digits 0-9"
    )


def test_calculator_ignores_any_whitespace_and_rejects_other_non_ascii() -> None:
    assert calculate("1\u00a0+\t2\n") == 3.0
    with pytest.raises(CalculationError, match="invalid character '²'"):
        calculate("3²")


def test_calculate_tool_reports_a_non_ascii_digit(db: dict[str, Any]) -> None:
    result = make_toolbox().execute(db, "calculate", {"expression": "١٢٣+1"})
    assert result.text.startswith("Error: non-ASCII digit '١'")


def test_calculate_tool_rounds_and_reports_errors(db: dict[str, Any]) -> None:
    box = make_toolbox()
    assert box.execute(db, "calculate", {"expression": "35.80 - 31.20"}).text == "4.6"
    assert box.execute(db, "calculate", {"expression": "2**3"}).text.startswith("Error")
