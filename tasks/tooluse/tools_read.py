"""Read-only tools: look-ups, the calculator, ``think`` and the hand-off to a human agent.

Each function is ``invoke(db, **arguments) -> str`` and never changes ``db``.
"""

from __future__ import annotations

import json
from typing import Any

from tasks.tooluse.calculator import CalculationError, calculate
from tasks.tooluse.db import Database
from tasks.tooluse.toolbox import Tool

ID_MAX = 64
TEXT_MAX = 256
LONG_TEXT_MAX = 2000


def string(description: str, max_length: int = ID_MAX, **extra: Any) -> dict[str, Any]:
    """A JSON Schema string property with a length cap."""
    return {"type": "string", "description": description, "maxLength": max_length, **extra}


ORDER_ID = string("The order id, such as '#W0000000' (note the leading '#').")
USER_ID = string("The user id, such as 'sara_doe_1234'.")


def _dumps(value: Any) -> str:
    return json.dumps(value)


def find_user_id_by_email(db: Database, email: str) -> str:
    """The user id whose email matches (case-insensitive)."""
    wanted = email.strip().lower()
    for user_id, user in db["users"].items():
        if str(user.get("email", "")).lower() == wanted:
            return user_id
    return "Error: user not found"


def find_user_id_by_name_zip(db: Database, first_name: str, last_name: str, zip: str) -> str:
    """The user id with this first name, last name (case-insensitive) and zip code."""
    first, last, code = first_name.strip().lower(), last_name.strip().lower(), zip.strip()
    for user_id, user in db["users"].items():
        name = user.get("name", {})
        if (
            str(name.get("first_name", "")).lower() == first
            and str(name.get("last_name", "")).lower() == last
            and str(user.get("address", {}).get("zip", "")) == code
        ):
            return user_id
    return "Error: user not found"


def get_user_details(db: Database, user_id: str) -> str:
    """The user's profile: name, address, email, payment methods, order ids."""
    user = db["users"].get(user_id)
    return _dumps(user) if user is not None else "Error: user not found"


def get_order_details(db: Database, order_id: str) -> str:
    """The order: items, status, address, fulfillments, payment history."""
    order = db["orders"].get(order_id)
    return _dumps(order) if order is not None else "Error: order not found"


def get_product_details(db: Database, product_id: str) -> str:
    """The product and all its variants (options, availability, price)."""
    product = db["products"].get(product_id)
    return _dumps(product) if product is not None else "Error: product not found"


def list_all_product_types(db: Database) -> str:
    """A map from product name to product id, sorted by name."""
    names = {str(p.get("name", pid)): pid for pid, p in db["products"].items()}
    return _dumps(dict(sorted(names.items())))


def calculate_tool(db: Database, expression: str) -> str:
    """Plain arithmetic (+ - * / and parentheses), rounded to 2 decimals."""
    try:
        return str(round(calculate(expression), 2))
    except CalculationError as exc:
        return f"Error: {exc}"


def think(db: Database, thought: str) -> str:
    """Lets the team write down reasoning as an action; changes nothing and returns ''."""
    return ""


def transfer_to_human_agents(db: Database, summary: str) -> str:
    """Hands the customer to a human agent; ends the episode."""
    return "Transfer successful"


READ_TOOLS: tuple[Tool, ...] = (
    Tool(
        "find_user_id_by_email",
        "Find a user id by email. If the user is not found, return an error.",
        {"email": string("The email of the user, such as 'something@example.com'.", TEXT_MAX)},
        ("email",),
        find_user_id_by_email,
    ),
    Tool(
        "find_user_id_by_name_zip",
        "Find a user id by first name, last name and zip code. Use it only if the user cannot "
        "be found by email. If the user is not found, return an error.",
        {
            "first_name": string("The first name of the user, such as 'John'.", TEXT_MAX),
            "last_name": string("The last name of the user, such as 'Doe'.", TEXT_MAX),
            "zip": string("The zip code of the user, such as '12345'.", 16),
        },
        ("first_name", "last_name", "zip"),
        find_user_id_by_name_zip,
    ),
    Tool(
        "get_user_details",
        "Get the details of a user: name, address, email, payment methods and order ids.",
        {"user_id": USER_ID},
        ("user_id",),
        get_user_details,
    ),
    Tool(
        "get_order_details",
        "Get the status and details of an order.",
        {"order_id": ORDER_ID},
        ("order_id",),
        get_order_details,
    ),
    Tool(
        "get_product_details",
        "Get the inventory details of a product: every variant item with its options, "
        "availability and price.",
        {"product_id": string("The product id, such as '6086499569'. Not an item id.")},
        ("product_id",),
        get_product_details,
    ),
    Tool(
        "list_all_product_types",
        "List the name and product id of every product type in the store.",
        {},
        (),
        list_all_product_types,
    ),
    Tool(
        "calculate",
        "Calculate the result of an arithmetic expression with numbers (ASCII digits 0-9), "
        "+ - * /, parentheses and spaces, such as '2 + 2'. The result is rounded to 2 decimals.",
        {"expression": string("The expression, such as '(12.5 + 3) * 2'.", TEXT_MAX)},
        ("expression",),
        calculate_tool,
    ),
    Tool(
        "think",
        "Write down a thought. It changes nothing and returns nothing; use it for complex "
        "reasoning.",
        {"thought": string("A thought to think about.", LONG_TEXT_MAX)},
        ("thought",),
        think,
    ),
    Tool(
        "transfer_to_human_agents",
        "Transfer the user to a human agent, with a summary of the issue. Only transfer if the "
        "user explicitly asks for a human agent, or the request cannot be handled with the "
        "other tools under the policy. This ends the conversation.",
        {"summary": string("A summary of the user's issue.", LONG_TEXT_MAX)},
        ("summary",),
        transfer_to_human_agents,
        terminal=True,
    ),
)
