"""Tools that change the database: cancel or modify pending orders, return or exchange delivered
items, update a user's default address.

Each function is ``invoke(db, **arguments) -> str``. It checks everything before it changes
anything, and the :class:`~tasks.tooluse.toolbox.ToolBox` runs it on a copy committed only on
success, so a failed call never leaves a half-applied change.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from tasks.tooluse.db import Database
from tasks.tooluse.toolbox import Tool
from tasks.tooluse.tools_read import ID_MAX, ORDER_ID, TEXT_MAX, USER_ID, string

CANCEL_REASONS = ("no longer needed", "ordered by mistake")
MAX_ITEMS = 50

PAYMENT_METHOD_ID = string(
    "A payment method id of the user, such as 'gift_card_0000000' or 'credit_card_0000000'."
)
ITEM_IDS = {
    "type": "array",
    "items": {"type": "string", "maxLength": ID_MAX},
    "maxItems": MAX_ITEMS,
    "description": "Item ids, such as ['1008292230']; an id may repeat.",
}
ADDRESS = {
    "address1": string("The first address line, such as '123 Main St'.", TEXT_MAX),
    "address2": string("The second address line, such as 'Apt 1', or ''.", TEXT_MAX),
    "city": string("The city, such as 'San Francisco'.", TEXT_MAX),
    "state": string("The state or province, such as 'CA'.", TEXT_MAX),
    "country": string("The country, such as 'USA'.", TEXT_MAX),
    "zip": string("The zip code, such as '12345'.", 16),
}
ADDRESS_FIELDS = tuple(ADDRESS)


def _dumps(value: Any) -> str:
    return json.dumps(value)


def _order(db: Database, order_id: str, status: str) -> dict[str, Any] | str:
    order = db["orders"].get(order_id)
    if order is None:
        return "Error: order not found"
    if order.get("status") != status:
        return f"Error: the order status is {order.get('status')!r}; this needs a {status} order"
    return order


def _payment_method(db: Database, order: dict[str, Any], method_id: str) -> dict[str, Any] | None:
    return db["users"][order["user_id"]]["payment_methods"].get(method_id)


def _missing_items(order: dict[str, Any], item_ids: list[str]) -> str | None:
    have = Counter(item["item_id"] for item in order["items"])
    for item_id, count in Counter(item_ids).items():
        if count > have[item_id]:
            return f"Error: item {item_id} not found in the order (or listed too often)"
    return None


def _swap_price_difference(
    db: Database, order: dict[str, Any], item_ids: list[str], new_item_ids: list[str]
) -> float | str:
    """Price of the new items minus the old ones, or an error if a swap is not allowed."""
    if len(item_ids) != len(new_item_ids):
        return "Error: item_ids and new_item_ids must have the same length"
    if not item_ids:
        return "Error: no items given"
    missing = _missing_items(order, item_ids)
    if missing:
        return missing
    difference = 0.0
    for old_id, new_id in zip(item_ids, new_item_ids):
        item = next(i for i in order["items"] if i["item_id"] == old_id)
        variant = db["products"][item["product_id"]]["variants"].get(new_id)
        if variant is None or not variant.get("available"):
            return f"Error: new item {new_id} is not an available variant of {item['name']}"
        difference += variant["price"] - item["price"]
    return round(difference, 2)


def _apply_swaps(
    db: Database, order: dict[str, Any], item_ids: list[str], new_item_ids: list[str]
) -> None:
    for old_id, new_id in zip(item_ids, new_item_ids):
        item = next(i for i in order["items"] if i["item_id"] == old_id)
        variant = db["products"][item["product_id"]]["variants"][new_id]
        item.update(item_id=new_id, price=variant["price"], options=variant["options"])


def cancel_pending_order(db: Database, order_id: str, reason: str) -> str:
    """Cancels a pending order; refunds every payment (gift cards immediately)."""
    order = _order(db, order_id, "pending")
    if isinstance(order, str):
        return order
    if reason not in CANCEL_REASONS:
        return f"Error: reason must be one of {list(CANCEL_REASONS)}"
    refunds = []
    for payment in order["payment_history"]:
        method_id, amount = payment["payment_method_id"], payment["amount"]
        refunds.append(
            {"transaction_type": "refund", "amount": amount, "payment_method_id": method_id}
        )
        method = _payment_method(db, order, method_id)
        if method is not None and method.get("source") == "gift_card":
            method["balance"] = round(method["balance"] + amount, 2)
    order["status"] = "cancelled"
    order["cancel_reason"] = reason
    order["payment_history"].extend(refunds)
    return _dumps(order)


def modify_pending_order_address(db: Database, order_id: str, **address: str) -> str:
    """Changes the shipping address of a pending order."""
    order = _order(db, order_id, "pending")
    if isinstance(order, str):
        return order
    order["address"] = {key: address[key] for key in ADDRESS_FIELDS}
    return _dumps(order)


def modify_pending_order_items(
    db: Database,
    order_id: str,
    item_ids: list[str],
    new_item_ids: list[str],
    payment_method_id: str,
) -> str:
    """Swaps items of a pending order for other variants of the same products (once)."""
    order = _order(db, order_id, "pending")
    if isinstance(order, str):
        return order
    difference = _swap_price_difference(db, order, item_ids, new_item_ids)
    if isinstance(difference, str):
        return difference
    method = _payment_method(db, order, payment_method_id)
    if method is None:
        return "Error: payment method not found"
    if method.get("source") == "gift_card" and method["balance"] < difference:
        return "Error: insufficient gift card balance to pay for the new items"
    order["payment_history"].append(
        {
            "transaction_type": "payment" if difference > 0 else "refund",
            "amount": abs(difference),
            "payment_method_id": payment_method_id,
        }
    )
    if method.get("source") == "gift_card":
        method["balance"] = round(method["balance"] - difference, 2)
    _apply_swaps(db, order, item_ids, new_item_ids)
    order["status"] = "pending (item modified)"
    return _dumps(order)


def modify_pending_order_payment(db: Database, order_id: str, payment_method_id: str) -> str:
    """Moves the single payment of a pending order to another payment method of the user."""
    order = _order(db, order_id, "pending")
    if isinstance(order, str):
        return order
    method = _payment_method(db, order, payment_method_id)
    if method is None:
        return "Error: payment method not found"
    history = order["payment_history"]
    if len(history) != 1 or history[0]["transaction_type"] != "payment":
        return "Error: a pending order must have exactly one payment to change it"
    old_id, amount = history[0]["payment_method_id"], history[0]["amount"]
    if old_id == payment_method_id:
        return "Error: the new payment method must differ from the current one"
    if method.get("source") == "gift_card" and method["balance"] < amount:
        return "Error: insufficient gift card balance to pay for the order"
    history.append(
        {"transaction_type": "payment", "amount": amount, "payment_method_id": payment_method_id}
    )
    history.append({"transaction_type": "refund", "amount": amount, "payment_method_id": old_id})
    if method.get("source") == "gift_card":
        method["balance"] = round(method["balance"] - amount, 2)
    old = _payment_method(db, order, old_id)
    if old is not None and old.get("source") == "gift_card":
        old["balance"] = round(old["balance"] + amount, 2)
    return _dumps(order)


def modify_user_address(db: Database, user_id: str, **address: str) -> str:
    """Changes a user's default address."""
    user = db["users"].get(user_id)
    if user is None:
        return "Error: user not found"
    user["address"] = {key: address[key] for key in ADDRESS_FIELDS}
    return _dumps(user)


def return_delivered_order_items(
    db: Database, order_id: str, item_ids: list[str], payment_method_id: str
) -> str:
    """Requests the return of items of a delivered order; refund to the original payment method
    or a gift card."""
    order = _order(db, order_id, "delivered")
    if isinstance(order, str):
        return order
    if not item_ids:
        return "Error: no items given"
    method = _payment_method(db, order, payment_method_id)
    if method is None:
        return "Error: payment method not found"
    original = order["payment_history"][0]["payment_method_id"]
    if method.get("source") != "gift_card" and payment_method_id != original:
        return "Error: the refund must go to the original payment method or a gift card"
    missing = _missing_items(order, item_ids)
    if missing:
        return missing
    order["status"] = "return requested"
    order["return_items"] = sorted(item_ids)
    order["return_payment_method_id"] = payment_method_id
    return _dumps(order)


def exchange_delivered_order_items(
    db: Database,
    order_id: str,
    item_ids: list[str],
    new_item_ids: list[str],
    payment_method_id: str,
) -> str:
    """Requests the exchange of items of a delivered order for other variants of the same
    products (once)."""
    order = _order(db, order_id, "delivered")
    if isinstance(order, str):
        return order
    difference = _swap_price_difference(db, order, item_ids, new_item_ids)
    if isinstance(difference, str):
        return difference
    method = _payment_method(db, order, payment_method_id)
    if method is None:
        return "Error: payment method not found"
    if method.get("source") == "gift_card" and method["balance"] < difference:
        return "Error: insufficient gift card balance to pay for the price difference"
    order["status"] = "exchange requested"
    order["exchange_items"] = sorted(item_ids)
    order["exchange_new_items"] = sorted(new_item_ids)
    order["exchange_payment_method_id"] = payment_method_id
    order["exchange_price_difference"] = difference
    return _dumps(order)


_CONFIRM = " Explain the details and get the user's explicit confirmation (yes) first."
_SWAP = {
    "order_id": ORDER_ID,
    "item_ids": ITEM_IDS,
    "new_item_ids": {
        **ITEM_IDS,
        "description": "The new item ids, one per entry of item_ids, each a variant of the "
        "same product.",
    },
    "payment_method_id": PAYMENT_METHOD_ID,
}

WRITE_TOOLS: tuple[Tool, ...] = (
    Tool(
        "cancel_pending_order",
        "Cancel a pending order and refund its payments (gift cards at once, other methods in "
        "5-7 business days)." + _CONFIRM,
        {
            "order_id": ORDER_ID,
            "reason": string("Why the order is cancelled.", ID_MAX, enum=list(CANCEL_REASONS)),
        },
        ("order_id", "reason"),
        cancel_pending_order,
        writes=True,
    ),
    Tool(
        "modify_pending_order_address",
        "Change the shipping address of a pending order." + _CONFIRM,
        {"order_id": ORDER_ID, **ADDRESS},
        ("order_id", *ADDRESS_FIELDS),
        modify_pending_order_address,
        writes=True,
    ),
    Tool(
        "modify_pending_order_items",
        "Change items of a pending order to other variants of the same products; the price "
        "difference is paid with or refunded to the given payment method. Can be done once per "
        "order." + _CONFIRM,
        _SWAP,
        tuple(_SWAP),
        modify_pending_order_items,
        writes=True,
    ),
    Tool(
        "modify_pending_order_payment",
        "Pay a pending order with another payment method of the user; the old one is "
        "refunded." + _CONFIRM,
        {"order_id": ORDER_ID, "payment_method_id": PAYMENT_METHOD_ID},
        ("order_id", "payment_method_id"),
        modify_pending_order_payment,
        writes=True,
    ),
    Tool(
        "modify_user_address",
        "Change the default address of a user." + _CONFIRM,
        {"user_id": USER_ID, **ADDRESS},
        ("user_id", *ADDRESS_FIELDS),
        modify_user_address,
        writes=True,
    ),
    Tool(
        "return_delivered_order_items",
        "Return items of a delivered order; the refund goes to the original payment method or "
        "a gift card of the user. Can be done once per order." + _CONFIRM,
        {"order_id": ORDER_ID, "item_ids": ITEM_IDS, "payment_method_id": PAYMENT_METHOD_ID},
        ("order_id", "item_ids", "payment_method_id"),
        return_delivered_order_items,
        writes=True,
    ),
    Tool(
        "exchange_delivered_order_items",
        "Exchange items of a delivered order for other variants of the same products; the "
        "price difference is paid with or refunded to the given payment method. Can be done "
        "once per order." + _CONFIRM,
        _SWAP,
        tuple(_SWAP),
        exchange_delivered_order_items,
        writes=True,
    ),
)
