"""Executable function families for synthetic function-calling tasks (:mod:`divelab.envs.tool_tasks`).

Each family is a small real function (unit conversion, geometry, finance, text, dates, lookups in fixed
tables) with a JSON-schema signature, several names it may be offered under, question templates that state
its arguments, and a value sampler. Calling it returns a JSON result that follows from the arguments by the
function's own rule, so the result of a call is something a world model can learn to predict (and something
a shuffled result is not).

The families, names, wordings and tables are divelab's; none comes from a public benchmark, so a model
adapted on them and tested on one (BFCL) is tested on functions and questions it never saw.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

Rng = np.random.Generator

COUNTRY_CAPITAL = {"Portugal": "Lisbon", "Kenya": "Nairobi", "Ecuador": "Quito", "Estonia": "Tallinn",
                   "Ghana": "Accra", "Vietnam": "Hanoi", "Senegal": "Dakar", "Norway": "Oslo", "Peru": "Lima",
                   "Poland": "Warsaw", "Canada": "Ottawa", "Japan": "Tokyo", "Chile": "Santiago", "Egypt": "Cairo"}
RATES = {"USD": 1.0, "EUR": 0.9, "GBP": 0.8, "JPY": 150.0, "CAD": 1.35, "INR": 83.0, "BRL": 5.0, "CHF": 0.88}
LENGTH_M = {"meters": 1.0, "kilometers": 1000.0, "miles": 1609.344, "feet": 0.3048, "inches": 0.0254,
            "centimeters": 0.01}
WORDS = {"apple": {"spanish": "manzana", "french": "pomme", "german": "Apfel"},
         "water": {"spanish": "agua", "french": "eau", "german": "Wasser"},
         "house": {"spanish": "casa", "french": "maison", "german": "Haus"},
         "book": {"spanish": "libro", "french": "livre", "german": "Buch"},
         "friend": {"spanish": "amigo", "french": "ami", "german": "Freund"},
         "bread": {"spanish": "pan", "french": "pain", "german": "Brot"},
         "night": {"spanish": "noche", "french": "nuit", "german": "Nacht"}}
RECIPES = {"rice": [("fried rice", 20), ("risotto", 40), ("rice pudding", 55)],
           "eggs": [("omelette", 10), ("shakshuka", 30), ("quiche", 60)],
           "lentils": [("lentil soup", 35), ("dal", 25), ("lentil salad", 15)],
           "potatoes": [("mashed potatoes", 25), ("potato gratin", 70), ("hash browns", 20)],
           "tomatoes": [("tomato soup", 30), ("bruschetta", 10), ("pasta sauce", 45)]}
TICKERS = {"ACME": 41.2, "GLOBX": 118.5, "INITECH": 12.75, "UMBRL": 88.0, "HOOLI": 230.4, "STARK": 305.1}
TEXTS = ("the quick brown fox", "a stitch in time saves nine", "every river runs to the sea", "hello world",
         "practice makes perfect", "the early bird gets the worm", "measure twice cut once", "open the door")
PEOPLE = ("Amara", "Jonas", "Mei", "Tomasz", "Ines", "Ravi", "Lucia", "Kwame", "Sofia", "Henrik")
RESTAURANTS = ("Blue Lantern", "Casa Verde", "The Copper Pot", "Sakura House", "Olive & Thyme", "Harbor Grill")


def _n(rng: Rng, lo: int, hi: int) -> int:
    return int(rng.integers(lo, hi + 1))


def _f(rng: Rng, lo: float, hi: float, digits: int = 1) -> float:
    return round(float(rng.uniform(lo, hi)), digits)


def _pick(rng: Rng, seq: Any) -> Any:
    seq = list(seq)
    return seq[int(rng.integers(len(seq)))]


def _two(rng: Rng, seq: Any) -> tuple[Any, Any]:
    seq = list(seq)
    i, j = rng.choice(len(seq), size=2, replace=False)
    return seq[int(i)], seq[int(j)]


def _r(x: float, digits: int = 2) -> float:
    return round(float(x), digits)


def _date(rng: Rng) -> str:
    return (_dt.date(2026, 1, 1) + _dt.timedelta(days=_n(rng, 0, 330))).isoformat()


@dataclass(frozen=True)
class Param:
    type: str  # JSON schema: string, integer, number, boolean, array
    description: str
    enum: tuple[str, ...] = ()
    items: str = ""  # the item type of an array


@dataclass(frozen=True)
class Family:
    """One executable function: ``names`` it may be offered under (the first is its own), a description, its
    parameters (``required`` ones must be given), ``questions`` (templates over the argument names), a
    sampler of arguments and the function itself."""

    key: str
    names: tuple[str, ...]
    description: str
    params: dict[str, Param]
    required: tuple[str, ...]
    questions: tuple[str, ...]
    sample: Callable[[Rng], dict[str, Any]]
    run: Callable[[dict[str, Any]], dict[str, Any]]

    def schema(self) -> dict[str, Any]:
        props = {}
        for k, p in self.params.items():
            d: dict[str, Any] = {"type": p.type, "description": p.description}
            if p.enum:
                d["enum"] = list(p.enum)
            if p.items:
                d["items"] = {"type": p.items}
            props[k] = d
        return {"type": "object", "properties": props, "required": list(self.required)}


def _fam(key: str, names: tuple[str, ...], description: str, params: dict[str, Param], required: tuple[str, ...],
         questions: tuple[str, ...], sample: Callable[[Rng], dict[str, Any]],
         run: Callable[[dict[str, Any]], dict[str, Any]]) -> Family:
    return Family(key, names, description, params, required, questions, sample, run)


def _temp(a: dict[str, Any]) -> dict[str, Any]:
    c = {"celsius": lambda v: v, "fahrenheit": lambda v: (v - 32) * 5 / 9, "kelvin": lambda v: v - 273.15}
    back = {"celsius": lambda v: v, "fahrenheit": lambda v: v * 9 / 5 + 32, "kelvin": lambda v: v + 273.15}
    return {"value": _r(back[a["to_unit"]](c[a["from_unit"]](a["value"]))), "unit": a["to_unit"]}


def _isprime(n: int) -> bool:
    return n > 1 and all(n % d for d in range(2, int(math.isqrt(n)) + 1))


TEMP_UNITS = ("celsius", "fahrenheit", "kelvin")

FAMILIES: tuple[Family, ...] = (
    _fam("temperature", ("convert_temperature", "temperature.convert", "temp_unit_converter"),
         "Convert a temperature between units.",
         {"value": Param("number", "The temperature to convert."),
          "from_unit": Param("string", "The unit of the value.", TEMP_UNITS),
          "to_unit": Param("string", "The unit to convert to.", TEMP_UNITS)}, ("value", "from_unit", "to_unit"),
         ("Convert {value} degrees {from_unit} to {to_unit}.", "What is {value} {from_unit} in {to_unit}?",
          "I measured {value} {from_unit}; how much is that in {to_unit}?"),
         lambda g: dict(zip(("from_unit", "to_unit"), _two(g, TEMP_UNITS), strict=True), value=_n(g, -20, 120)),
         _temp),
    _fam("length", ("convert_length", "units.length_convert", "distance_unit_conversion"),
         "Convert a length from one unit to another.",
         {"amount": Param("number", "The length."), "source_unit": Param("string", "Unit of the length.",
                                                                           tuple(LENGTH_M)),
          "target_unit": Param("string", "Unit wanted.", tuple(LENGTH_M))}, ("amount", "source_unit", "target_unit"),
         ("How many {target_unit} are {amount} {source_unit}?", "Convert {amount} {source_unit} into {target_unit}.",
          "Express a length of {amount} {source_unit} in {target_unit}."),
         lambda g: dict(zip(("source_unit", "target_unit"), _two(g, LENGTH_M), strict=True), amount=_n(g, 1, 500)),
         lambda a: {"amount": _r(a["amount"] * LENGTH_M[a["source_unit"]] / LENGTH_M[a["target_unit"]], 3),
                    "unit": a["target_unit"]}),
    _fam("currency", ("convert_currency", "fx.exchange", "currency_exchange_amount"),
         "Convert an amount of money between currencies at today's rate.",
         {"amount": Param("number", "Money to convert."), "from_currency": Param("string", "Currency code.",
                                                                                  tuple(RATES)),
          "to_currency": Param("string", "Currency code wanted.", tuple(RATES))},
         ("amount", "from_currency", "to_currency"),
         ("How much is {amount} {from_currency} in {to_currency}?", "Exchange {amount} {from_currency} to "
          "{to_currency}.", "I have {amount} {from_currency}. What would I get in {to_currency}?"),
         lambda g: dict(zip(("from_currency", "to_currency"), _two(g, RATES), strict=True), amount=_n(g, 5, 2000)),
         lambda a: {"amount": _r(a["amount"] / RATES[a["from_currency"]] * RATES[a["to_currency"]]),
                    "currency": a["to_currency"]}),
    _fam("rectangle", ("rectangle_area", "geometry.rect_area", "area_of_rectangle"),
         "Area of a rectangle from its width and height.",
         {"width": Param("number", "Width."), "height": Param("number", "Height.")}, ("width", "height"),
         ("What is the area of a rectangle {width} wide and {height} high?", "Compute the area of a {width} by "
          "{height} rectangle.", "A room is {width} by {height}; what is its area?"),
         lambda g: {"width": _n(g, 1, 60), "height": _n(g, 1, 60)},
         lambda a: {"area": _r(a["width"] * a["height"])}),
    _fam("circle", ("circle_area", "geometry.circle_area", "area_circle"),
         "Area of a circle from its radius.", {"radius": Param("number", "Radius of the circle.")}, ("radius",),
         ("Find the area of a circle with radius {radius}.", "What's the area of a circle whose radius is {radius}?"),
         lambda g: {"radius": _n(g, 1, 40)}, lambda a: {"area": _r(math.pi * a["radius"] ** 2)}),
    _fam("hypotenuse", ("hypotenuse_length", "math.hypot", "right_triangle_hypotenuse"),
         "Length of the hypotenuse of a right triangle from its two legs.",
         {"leg_a": Param("number", "First leg."), "leg_b": Param("number", "Second leg.")}, ("leg_a", "leg_b"),
         ("A right triangle has legs {leg_a} and {leg_b}. How long is the hypotenuse?",
          "Compute the hypotenuse for legs of {leg_a} and {leg_b}."),
         lambda g: {"leg_a": _n(g, 1, 30), "leg_b": _n(g, 1, 30)},
         lambda a: {"hypotenuse": _r(math.hypot(a["leg_a"], a["leg_b"]))}),
    _fam("interest", ("compound_interest", "finance.compound_growth", "savings_future_value"),
         "Future value of a deposit with yearly compound interest.",
         {"principal": Param("number", "Initial deposit."), "annual_rate": Param("number", "Yearly rate in percent."),
          "years": Param("integer", "Number of years.")}, ("principal", "annual_rate", "years"),
         ("If I deposit {principal} at {annual_rate}% a year for {years} years, what will I have?",
          "Future value of {principal} invested at {annual_rate} percent yearly over {years} years?"),
         lambda g: {"principal": _n(g, 100, 20000), "annual_rate": _f(g, 0.5, 9.0), "years": _n(g, 1, 30)},
         lambda a: {"future_value": _r(a["principal"] * (1 + a["annual_rate"] / 100) ** a["years"])}),
    _fam("tip", ("calculate_tip", "restaurant.tip", "tip_calculator"),
         "Tip and total for a restaurant bill.",
         {"bill": Param("number", "Bill amount."), "percent": Param("number", "Tip percentage.")}, ("bill", "percent"),
         ("What tip should I leave on a {bill} bill at {percent}%?", "Work out a {percent} percent tip for a bill "
          "of {bill}."),
         lambda g: {"bill": _f(g, 8, 300, 2), "percent": _pick(g, (10, 12, 15, 18, 20, 25))},
         lambda a: {"tip": _r(a["bill"] * a["percent"] / 100), "total": _r(a["bill"] * (1 + a["percent"] / 100))}),
    _fam("discount", ("discounted_price", "shop.apply_discount", "sale_price"),
         "Price after a percentage discount.",
         {"price": Param("number", "Original price."), "discount_percent": Param("number", "Discount in percent.")},
         ("price", "discount_percent"),
         ("A jacket costs {price} and is {discount_percent}% off. What do I pay?", "Apply a {discount_percent}% "
          "discount to a price of {price}."),
         lambda g: {"price": _n(g, 5, 900), "discount_percent": _pick(g, (5, 10, 15, 20, 25, 30, 40, 50))},
         lambda a: {"price": _r(a["price"] * (1 - a["discount_percent"] / 100))}),
    _fam("bmi", ("body_mass_index", "health.bmi", "compute_bmi"),
         "Body mass index from weight and height.",
         {"weight_kg": Param("number", "Weight in kilograms."), "height_m": Param("number", "Height in meters.")},
         ("weight_kg", "height_m"),
         ("What's the BMI of someone who weighs {weight_kg} kg and is {height_m} m tall?", "Compute BMI for "
          "{weight_kg} kilograms at {height_m} meters."),
         lambda g: {"weight_kg": _n(g, 40, 130), "height_m": _f(g, 1.45, 2.05, 2)},
         lambda a: {"bmi": _r(a["weight_kg"] / a["height_m"] ** 2, 1)}),
    _fam("speed", ("average_speed", "physics.speed", "speed_from_distance"),
         "Average speed from a distance and the time taken.",
         {"distance_km": Param("number", "Distance in kilometers."), "hours": Param("number", "Time in hours.")},
         ("distance_km", "hours"),
         ("I drove {distance_km} km in {hours} hours. What was my average speed?", "Average speed for {distance_km} "
          "kilometers covered in {hours} hours?"),
         lambda g: {"distance_km": _n(g, 5, 900), "hours": _pick(g, (0.5, 1, 1.5, 2, 2.5, 3, 4, 5, 6, 8))},
         lambda a: {"km_per_hour": _r(a["distance_km"] / a["hours"])}),
    _fam("capital", ("get_capital", "geo.capital_of", "country_capital_lookup"),
         "The capital city of a country.", {"country": Param("string", "Country name.")}, ("country",),
         ("What is the capital of {country}?", "Which city is the capital of {country}?",
          "Tell me {country}'s capital."),
         lambda g: {"country": _pick(g, COUNTRY_CAPITAL)}, lambda a: {"capital": COUNTRY_CAPITAL[a["country"]]}),
    _fam("translate", ("translate_word", "dictionary.translate", "word_translation"),
         "Translate an English word into another language.",
         {"word": Param("string", "The English word."), "language": Param("string", "Target language.",
                                                                            ("spanish", "french", "german"))},
         ("word", "language"),
         ("How do you say '{word}' in {language}?", "Translate the word {word} to {language}."),
         lambda g: {"word": _pick(g, WORDS), "language": _pick(g, ("spanish", "french", "german"))},
         lambda a: {"translation": WORDS[a["word"]][a["language"]]}),
    _fam("recipes", ("find_recipes", "kitchen.search_recipes", "recipe_search"),
         "Recipes with an ingredient that take at most some minutes.",
         {"ingredient": Param("string", "Main ingredient."), "max_minutes": Param("integer", "Longest cooking time.")},
         ("ingredient", "max_minutes"),
         ("Find recipes with {ingredient} that take no more than {max_minutes} minutes.", "What can I cook with "
          "{ingredient} in {max_minutes} minutes or less?"),
         lambda g: {"ingredient": _pick(g, RECIPES), "max_minutes": _pick(g, (15, 20, 30, 45, 60, 90))},
         lambda a: {"recipes": [n for n, m in RECIPES[a["ingredient"]] if m <= a["max_minutes"]]}),
    _fam("stock", ("get_stock_price", "market.quote", "latest_share_price"),
         "Latest share price for a ticker symbol.", {"symbol": Param("string", "Ticker symbol.")}, ("symbol",),
         ("What's the current price of {symbol} shares?", "Get me a quote for {symbol}."),
         lambda g: {"symbol": _pick(g, TICKERS)}, lambda a: {"symbol": a["symbol"], "price": TICKERS[a["symbol"]]}),
    _fam("words", ("count_words", "text.word_count", "word_counter"),
         "Number of words in a text.", {"text": Param("string", "The text.")}, ("text",),
         ("How many words are in '{text}'?", "Count the words of the sentence \"{text}\"."),
         lambda g: {"text": _pick(g, TEXTS)}, lambda a: {"words": len(a["text"].split())}),
    _fam("reverse", ("reverse_text", "text.reverse", "string_reverser"),
         "The text written backwards.", {"text": Param("string", "The text.")}, ("text",),
         ("Reverse the string '{text}'.", "Write \"{text}\" backwards."),
         lambda g: {"text": _pick(g, TEXTS)}, lambda a: {"reversed": a["text"][::-1]}),
    _fam("vowels", ("count_vowels", "text.vowel_count", "vowel_counter"),
         "Number of vowels in a text.", {"text": Param("string", "The text.")}, ("text",),
         ("How many vowels does '{text}' contain?", "Count the vowels in \"{text}\"."),
         lambda g: {"text": _pick(g, TEXTS)}, lambda a: {"vowels": sum(c in "aeiou" for c in a["text"].lower())}),
    _fam("sort", ("sort_numbers", "lists.sort", "order_numbers"),
         "Sort a list of numbers.",
         {"numbers": Param("array", "The numbers.", items="number"),
          "descending": Param("boolean", "Largest first when true.")}, ("numbers",),
         ("Sort {numbers} from smallest to largest.", "Order these numbers: {numbers}."),
         lambda g: {"numbers": [_n(g, 0, 99) for _ in range(_n(g, 3, 6))]},
         lambda a: {"sorted": sorted(a["numbers"], reverse=bool(a.get("descending", False)))}),
    _fam("mean", ("average_of", "stats.mean", "mean_value"),
         "The mean of a list of numbers.", {"values": Param("array", "The numbers.", items="number")}, ("values",),
         ("What's the average of {values}?", "Compute the mean of {values}."),
         lambda g: {"values": [_n(g, 0, 99) for _ in range(_n(g, 3, 6))]},
         lambda a: {"mean": _r(sum(a["values"]) / len(a["values"]))}),
    _fam("factorial", ("factorial", "math.factorial_of", "compute_factorial"),
         "The factorial of a whole number.", {"n": Param("integer", "A whole number.")}, ("n",),
         ("What is {n} factorial?", "Compute the factorial of {n}."),
         lambda g: {"n": _n(g, 1, 12)}, lambda a: {"factorial": math.factorial(a["n"])}),
    _fam("prime", ("is_prime", "math.check_prime", "prime_test"),
         "Whether a whole number is prime.", {"number": Param("integer", "A whole number.")}, ("number",),
         ("Is {number} a prime number?", "Check whether {number} is prime."),
         lambda g: {"number": _n(g, 2, 500)}, lambda a: {"prime": _isprime(a["number"])}),
    _fam("gcd", ("greatest_common_divisor", "math.gcd_of", "gcd_calculator"),
         "Greatest common divisor of two whole numbers.",
         {"a": Param("integer", "First number."), "b": Param("integer", "Second number.")}, ("a", "b"),
         ("What's the greatest common divisor of {a} and {b}?", "Find the GCD of {a} and {b}."),
         lambda g: {"a": _n(g, 2, 300), "b": _n(g, 2, 300)}, lambda a: {"gcd": math.gcd(a["a"], a["b"])}),
    _fam("power", ("raise_to_power", "math.power", "exponentiate"),
         "A number raised to a power.",
         {"base": Param("number", "The base."), "exponent": Param("integer", "The exponent.")}, ("base", "exponent"),
         ("What is {base} to the power of {exponent}?", "Raise {base} to the {exponent}th power."),
         lambda g: {"base": _n(g, 2, 12), "exponent": _n(g, 2, 6)},
         lambda a: {"result": a["base"] ** a["exponent"]}),
    _fam("days_between", ("days_between_dates", "calendar.day_difference", "count_days"),
         "Number of days from one date to another (YYYY-MM-DD).",
         {"start_date": Param("string", "First date, YYYY-MM-DD."), "end_date": Param("string", "Second date.")},
         ("start_date", "end_date"),
         ("How many days are there from {start_date} to {end_date}?", "Count the days between {start_date} and "
          "{end_date}."),
         lambda g: dict(zip(("start_date", "end_date"), sorted((_date(g), _date(g))), strict=True)),
         lambda a: {"days": (_dt.date.fromisoformat(a["end_date"]) - _dt.date.fromisoformat(a["start_date"])).days}),
    _fam("add_days", ("add_days_to_date", "calendar.shift_date", "date_plus_days"),
         "The date a number of days after a given date (YYYY-MM-DD).",
         {"date": Param("string", "Start date, YYYY-MM-DD."), "days": Param("integer", "Days to add.")},
         ("date", "days"),
         ("What date is {days} days after {date}?", "Add {days} days to {date}."),
         lambda g: {"date": _date(g), "days": _n(g, 1, 120)},
         lambda a: {"date": (_dt.date.fromisoformat(a["date"]) + _dt.timedelta(days=a["days"])).isoformat()}),
    _fam("book_table", ("book_table", "reservations.create", "reserve_restaurant_table"),
         "Reserve a table at a restaurant.",
         {"restaurant": Param("string", "Restaurant name."), "people": Param("integer", "Party size."),
          "time": Param("string", "Time, HH:MM.")}, ("restaurant", "people", "time"),
         ("Book a table for {people} at {restaurant} at {time}.", "Reserve {restaurant} for {people} people, "
          "{time}."),
         lambda g: {"restaurant": _pick(g, RESTAURANTS), "people": _n(g, 1, 10),
                    "time": f"{_n(g, 11, 22)}:{_pick(g, ('00', '15', '30', '45'))}"},
         lambda a: {"status": "confirmed", "restaurant": a["restaurant"], "party": a["people"], "time": a["time"]}),
    _fam("message", ("send_message", "chat.post_message", "message_user"),
         "Send a short text message to a person.",
         {"recipient": Param("string", "Who gets it."), "text": Param("string", "The message.")},
         ("recipient", "text"),
         ("Send {recipient} a message saying '{text}'.", "Text {recipient}: \"{text}\"."),
         lambda g: {"recipient": _pick(g, PEOPLE), "text": _pick(g, TEXTS)},
         lambda a: {"status": "sent", "to": a["recipient"], "characters": len(a["text"])}),
    _fam("percentage", ("percentage_of", "math.percent_share", "share_in_percent"),
         "What percentage one number is of another.",
         {"part": Param("number", "The part."), "whole": Param("number", "The whole.")}, ("part", "whole"),
         ("What percentage of {whole} is {part}?", "{part} out of {whole} is how many percent?"),
         lambda g: (lambda w: {"part": _n(g, 1, w), "whole": w})(_n(g, 10, 400)),
         lambda a: {"percent": _r(100 * a["part"] / a["whole"])}),
    _fam("loan", ("monthly_loan_payment", "finance.loan_installment", "mortgage_payment"),
         "Monthly payment of a fixed-rate loan.",
         {"principal": Param("number", "Loan amount."), "annual_rate": Param("number", "Yearly rate in percent."),
          "years": Param("integer", "Loan term in years.")}, ("principal", "annual_rate", "years"),
         ("What's the monthly payment on a {principal} loan at {annual_rate}% over {years} years?",
          "Monthly installment for borrowing {principal} for {years} years at {annual_rate} percent?"),
         lambda g: {"principal": _n(g, 1000, 400000), "annual_rate": _f(g, 1.0, 9.0), "years": _n(g, 1, 30)},
         lambda a: (lambda r, k: {"monthly_payment": _r(a["principal"] * r / (1 - (1 + r) ** -k))})(
             a["annual_rate"] / 1200, 12 * a["years"])),
)


def family(key: str) -> Family:
    for f in FAMILIES:
        if f.key == key:
            return f
    raise ValueError(f"unknown tool family {key!r}; allowed: {', '.join(f.key for f in FAMILIES)}")
