"""Simple rules for text that looks like personal data: a query a user typed may hold their
e-mail address, phone number or an account, card or ID number, and such a query is not made
into ground truth (it would be shown to reviewers and stored in the harness's tables).

The rules are deliberately plain and err on the side of skipping: a long number is skipped
whatever it is. They are no anonymiser: a name or an address in words passes.

>>> personal_data("email me at jane.doe@example.org please")
'an e-mail address'
>>> personal_data("call +44 20 7946 0958 tomorrow")
'a phone number'
>>> personal_data("my card 4111111111111111 was charged twice")
'a long digit run'
>>> personal_data("side effects of vitamin D3 in 2019-2020 trials") is None
True
"""

from __future__ import annotations

import re

_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
# digits with the separators phone numbers are written with: +44 (20) 7946-0958, 555.123.4567
_PHONE = re.compile(r"\+?\(?\d[\d\s().-]{5,}\d")
PHONE_DIGITS = 7          # a run of at least this many digits, written with separators
LONG_DIGIT_RUN = 9        # this many digits in a row: an account, card or ID number
_YEARS = re.compile(r"\d{4}\s*-\s*\d{4}")  # 2019-2020 is a span of years, not a phone


def personal_data(text: str) -> str | None:
    """What in ``text`` looks like personal data ('an e-mail address', 'a phone number', 'a
    long digit run'), or None."""
    if _EMAIL.search(text):
        return "an e-mail address"
    if re.search(r"\d{" + str(LONG_DIGIT_RUN) + ",}", text):
        return "a long digit run"
    for match in _PHONE.finditer(text):
        found = match.group()
        if (sum(c.isdigit() for c in found) >= PHONE_DIGITS and not found.isdigit()
                and not _YEARS.fullmatch(found.strip())):
            return "a phone number"
    return None
