"""The redactor: every secret, in the usual encodings, masked wherever a run writes."""

import base64
import json
import re
from urllib.parse import quote, quote_plus

import orjson
import pytest

from belvedir.redaction import MASK, MIN_LENGTH, Redactor
from belvedir.sandbox.output import TailBuffer
from harnesses.results import parse_results

SECRET = "sk-live/4f+Qz9 Tk=rW&8xYv"  # characters each encoding spells differently


def encodings(value: str) -> dict[str, str]:
    raw = value.encode()
    return {
        "plain": value,
        "url": quote(value, safe=""),
        "url, lower-case hex": re.sub("%[0-9A-F]{2}", lambda m: m[0].lower(), quote(value, safe="")),
        "url, plus for space": quote_plus(value),
        "base64": base64.b64encode(raw).decode(),
        "base64 after 1 byte": base64.b64encode(b"a" + raw + b"tail").decode(),
        "base64 after 2 bytes": base64.b64encode(b"ab" + raw + b"t").decode(),
        "url-safe base64 after 2 bytes": base64.urlsafe_b64encode(b"ab" + raw).decode(),
        "base64 inside a longer text": base64.b64encode(b"Authorization: Bearer " + raw + b"\r\n").decode(),
    }


def spelled(value: str) -> dict[str, str]:
    """The ways a program spells a secret out that no decoder undoes: each must be masked too."""
    raw = value.encode()
    return {
        "hex": raw.hex(),
        "upper-case hex": raw.hex().upper(),
        "hex, a space between bytes": " ".join(f"{b:02X}" for b in raw),
        "hex, colons (a fingerprint)": ":".join(f"{b:02x}" for b in raw),
        "upper-case": value.upper(),
        "mixed case": "".join(c.upper() if i % 2 else c.lower() for i, c in enumerate(value)),
        "reversed": value[::-1],
        "reversed, upper-case": value[::-1].upper(),
        "spaced": " ".join(value),
        "dashed": "-".join(value),
        "one character a line": "\n".join(value),
        "one character a line, CRLF": "\r\n".join(value),
        "upper-case base64": base64.b64encode(raw).decode().upper(),
    }


def pieces(value: str, length: int = MIN_LENGTH) -> list[str]:
    """Every run of `length` characters of `value`: none may be stored, even in part."""
    return [value[i : i + length] for i in range(len(value) - length + 1)]


@pytest.mark.parametrize("name", list(encodings(SECRET)))
def test_it_masks_each_encoding_of_a_secret(name):
    encoded = encodings(SECRET)[name]
    redactor = Redactor([SECRET])
    masked = redactor.text(f"before {encoded} after")
    assert MASK in masked
    assert SECRET not in masked and encoded not in masked
    assert redactor.found == {SECRET}


@pytest.mark.parametrize("name", list(spelled(SECRET)))
def test_it_masks_each_spelling_of_a_secret(name):
    form = spelled(SECRET)[name]
    redactor = Redactor([SECRET])
    masked = redactor.text(f"before {form} after")
    # (base64's last characters also hold the bits after the value: kept.)
    assert masked.startswith(f"before {MASK}") and masked.endswith(" after") and no_piece_of(SECRET, masked)
    assert redactor.found == {SECRET}
    # Inside a JSON string too (a newline there is escaped), as span and results text is scanned.
    assert Redactor([SECRET]).values([{"k": f"before {form} after"}]) == [{"k": masked}]


def no_piece_of(value: str, text: str) -> bool:
    """Whether `text` holds no run of MIN_LENGTH characters of any form of `value` above, in any case."""
    lowered = text.lower()
    raw = value.encode()
    # Base64 of the value alone at each alignment, less the characters that also hold the bytes around it.
    based = [base64.b64encode(b"a" * k + raw).decode()[2:-3] for k in range(3)]
    forms = {value, quote(value, safe=""), quote_plus(value), *based, *spelled(value).values()}
    return not any(form.lower()[i : i + MIN_LENGTH] in lowered for form in forms for i in range(len(form) - MIN_LENGTH + 1))


@pytest.mark.parametrize("cut", range(MIN_LENGTH, len(SECRET) - MIN_LENGTH + 1))
def test_a_secret_split_across_two_lines_is_masked(cut):
    # print(key[:n]); print(key[n:]): neither line holds the whole secret.
    redactor = Redactor([SECRET])
    masked = redactor.text(f"first line\ntoken={SECRET[:cut]}\n{SECRET[cut:]}\nlast line\n")
    assert masked == f"first line\ntoken={MASK}\n{MASK}\nlast line\n"
    assert no_piece_of(SECRET, masked) and redactor.found == {SECRET}
    hexed = SECRET.encode().hex().upper()
    assert Redactor([SECRET]).text(f"{hexed[: cut * 2]}\r\n{hexed[cut * 2 :]} done") == f"{MASK}\r\n{MASK} done"


@pytest.mark.parametrize("cut", range(MIN_LENGTH, len(SECRET) - MIN_LENGTH + 1))
@pytest.mark.parametrize("write", [json.dumps, repr, lambda text: json.dumps({"lines": text})], ids=["json", "repr", "json-field"])
def test_a_secret_split_across_two_lines_printed_as_json_or_repr_text_is_masked(cut, write):
    # print(json.dumps(f"{key[:n]}\n{key[n:]}")): the two halves meet at the two characters \n, no newline between.
    redactor = Redactor([SECRET])
    masked = redactor.text(f"log: {write(SECRET[:cut] + chr(10) + SECRET[cut:])} end")
    assert no_piece_of(SECRET, masked) and redactor.found == {SECRET}, masked
    assert masked.count(MASK) == 2


@pytest.mark.parametrize("cut", range(MIN_LENGTH, len(SECRET) - MIN_LENGTH + 1))
def test_a_secret_split_across_two_json_fields_is_masked(cut):
    redactor = Redactor([SECRET])
    masked = redactor.value({"a": f"key {SECRET[:cut]}", "b": [f"{SECRET[cut:]} and more"], "c": "clean"})
    assert masked == {"a": f"key {MASK}", "b": [f"{MASK} and more"], "c": "clean"}
    assert redactor.values([{"a": f"key {SECRET[:cut]}"}, {"b": SECRET[cut:]}]) == [{"a": f"key {MASK}"}, {"b": MASK}]


@pytest.mark.parametrize("name", ["plain", *encodings(SECRET), *spelled(SECRET)])
def test_an_encoded_secret_straddling_two_chunks_leaves_no_piece_of_it(name):
    form = {"plain": SECRET, **encodings(SECRET), **spelled(SECRET)}[name]
    for cut in range(1, len(form)):
        tail = TailBuffer(10_000, Redactor([SECRET]))
        tail.write(f"[out] line one\n[out] key {form[:cut]}".encode())
        assert no_piece_of(SECRET, tail.text()), (cut, tail.text())
        tail.write(f"{form[cut:]} end\n[out] line two\n".encode())
        assert no_piece_of(SECRET, tail.text()), (cut, tail.text())
        text = tail.text(final=True)
        assert text.startswith("[out] line one\n[out] key ") and text.endswith(" end\n[out] line two\n")
        assert no_piece_of(SECRET, text), (cut, text)


@pytest.mark.parametrize("name", ["hex", "upper-case", "spaced"])
def test_a_secret_split_across_two_lines_written_as_two_chunks_is_masked(name):
    form = spelled(SECRET)[name]
    half = len(form) // 2
    tail = TailBuffer(10_000, Redactor([SECRET]))
    tail.write(f"[out] {form[:half]}\n".encode())
    tail.write(f"{form[half:]}\n[out] done\n".encode())
    assert tail.text(final=True) == f"[out] {MASK}\n{MASK}\n[out] done\n"


def test_a_value_shorter_than_the_minimum_is_not_redacted():
    short = "x" * (MIN_LENGTH - 1)
    redactor = Redactor([short, "y" * MIN_LENGTH])
    assert redactor.text(f"{short} {'y' * MIN_LENGTH}") == f"{short} {MASK}"


def test_a_secret_that_contains_another_is_masked_whole():
    inner = "abcdefgh1234"
    redactor = Redactor([inner, f"prefix-{inner}-suffix"])
    assert redactor.text(f"prefix-{inner}-suffix and {inner}") == f"{MASK} and {MASK}"


def test_json_like_values_are_masked_in_keys_and_values_and_keep_their_types():
    redactor = Redactor([SECRET])
    value = {"score": 1.0, "ok": True, "n": None, SECRET: [SECRET, {"deep": f"x{quote(SECRET, safe='')}y"}], "t": (1, SECRET)}
    assert redactor.value(value) == {"score": 1.0, "ok": True, "n": None, MASK: [MASK, {"deep": f"x{MASK}y"}], "t": (1, MASK)}


def test_a_list_without_secrets_is_returned_as_it_was():
    spans = [{"name": "step", "attributes": {"a": "b" * 100}}] * 50
    assert Redactor([SECRET]).values(spans) is spans


@pytest.mark.parametrize(
    "spelling",
    [
        SECRET.replace("s", "\\u0073"),  # a \u escape
        SECRET.replace("/", "\\/"),  # an escaped slash
        "\\u0000".join(SECRET),  # NUL escapes, stripped on storing
    ],
)
def test_a_body_that_could_hide_a_secret_is_not_trusted_to_show_it(spelling):
    source = f'{{"attributes": {{"k": "{spelling}"}}}}'.encode()
    items = [{"attributes": {"k": SECRET}}]  # what parsing (and cleaning) made of it
    assert Redactor([SECRET]).values(items, source) == [{"attributes": {"k": MASK}}]


def test_nul_bytes_between_a_secrets_characters_in_a_body_do_not_hide_it():
    source = b"\x0a\x12" + b"\x00".join(bytes([c]) for c in SECRET.encode())  # protobuf-like: raw bytes
    items = [{"attributes": {"k": SECRET}}]
    assert Redactor([SECRET]).values(items, source) == [{"attributes": {"k": MASK}}]


@pytest.mark.parametrize("secret", ["-----BEGIN KEY-----\nabc\n-----END-----", 'pass"word-123', "1234567890"])
def test_a_secret_that_json_escapes_or_a_number_is_looked_for_in_the_items_themselves(secret):
    source = b'{"attributes": {"k": "nothing to see"}}'  # as if the body spelled it some other way
    items = [{"attributes": {"k": f"x {secret}"}}]
    assert Redactor([secret]).values(items, source) == [{"attributes": {"k": f"x {MASK}"}}]


def test_a_clean_body_is_scanned_instead_of_its_items():
    source = b'{"attributes": {"k": "nothing to see"}}'
    items = [{"attributes": {"k": "nothing to see"}}]
    assert Redactor([SECRET]).values(items, source) is items
    leaky = [{"attributes": {"k": f"{SECRET} to see"}}]
    assert Redactor([SECRET]).values(leaky, source.replace(b"nothing", SECRET.encode())) == [{"attributes": {"k": f"{MASK} to see"}}]


def test_a_secret_escaped_inside_a_json_string_is_found_in_a_list():
    quoted = 'pa"ss\\word-12345'
    redactor = Redactor([quoted])
    assert redactor.values([{"attributes": {"k": f"x {quoted} y"}}]) == [{"attributes": {"k": f"x {MASK} y"}}]
    assert quoted in orjson.loads(orjson.dumps(quoted))  # (the scan ran over its escaped form)


@pytest.mark.parametrize("cut", range(1, len(SECRET)))
def test_a_secret_split_across_a_chunk_boundary_is_masked(cut):
    tail = TailBuffer(1000, Redactor([SECRET]))
    tail.write(f"line one\ntoken={SECRET[:cut]}".encode())
    # While the rest has not come, no part of the secret is shown either.
    assert not any(piece in tail.text() for piece in pieces(SECRET[:cut]))
    tail.write(f"{SECRET[cut:]}\nline two\n".encode())
    assert tail.text(final=True) == f"line one\ntoken={MASK}\nline two\n"


def test_a_secret_cut_by_the_start_of_the_tail_leaves_no_part_of_it():
    tail = TailBuffer(40, Redactor([SECRET]))
    tail.write(b"x" * 100 + SECRET[:10].encode())
    tail.write(SECRET[10:].encode() + b" and the last words")
    text = tail.text(final=True)
    assert text.endswith(" and the last words") and len(text.encode()) <= 40
    assert not any(piece in text for piece in pieces(SECRET))


def test_the_end_of_a_stream_is_masked_and_kept():
    tail = TailBuffer(1000, Redactor([SECRET]))
    tail.write(f"done; key {SECRET[:5]}".encode())
    tail.write(SECRET[5:].encode())
    assert not any(piece in tail.text() for piece in pieces(SECRET[:5], 5))  # held back: the secret may go on
    assert tail.text(final=True) == f"done; key {MASK}"


def test_a_secret_with_nul_bytes_between_its_characters_is_masked():
    tail = TailBuffer(1000, Redactor([SECRET]))
    tail.write("\x00".join(SECRET).encode() + b"\n")
    assert tail.text(final=True) == f"{MASK}\n"


def test_results_json_is_masked_after_parsing_so_escapes_cannot_hide_a_secret():
    spelled = "".join(f"\\u{ord(c):04x}" for c in SECRET)
    raw = f'{{"score": 1, "model": "{spelled}", "notes": ["{SECRET}"], "{SECRET}": 2}}'.encode()
    redactor = Redactor([SECRET])
    parsed = parse_results(raw, redactor)
    assert parsed.results == {"score": 1, "model": MASK, "notes": [MASK], MASK: 2}
    assert parsed.model == MASK and parsed.score == 1.0
    assert redactor.found == {SECRET}


def test_a_secret_in_a_refused_score_is_not_quoted_in_the_error():
    parsed = parse_results(f'{{"score": "{SECRET}"}}'.encode(), Redactor([SECRET]))
    assert SECRET not in parsed.error and MASK in parsed.error


@pytest.mark.parametrize("marker", ["", "… [truncated 40 characters]"])
@pytest.mark.parametrize("cut", range(1, len(SECRET)))
def test_a_text_cut_inside_a_secret_keeps_no_run_of_the_minimum_length_of_it(cut, marker):
    # As a length limit leaves it: the secret's beginning at the text's end, or before the mark of the cut.
    redactor = Redactor([SECRET])
    masked = redactor.value({"k": "x" * 30 + SECRET[:cut] + marker})["k"]
    assert not any(piece in masked for piece in pieces(SECRET))
    assert masked.endswith(marker) and masked.startswith("x" * 30)
    if cut >= MIN_LENGTH:
        assert masked == "x" * 30 + MASK + marker and redactor.found == {SECRET}
    else:  # less than a whole value's minimum: kept, as a shorter secret is
        assert masked == "x" * 30 + SECRET[:cut] + marker and not redactor.found


def test_a_piece_of_a_secret_is_masked_only_at_a_boundary():
    redactor = Redactor([SECRET])
    inside = f"it said {SECRET[:12]} and went on"
    assert redactor.text(inside) == inside and redactor.text(f"{inside}; {SECRET[:12]}") == f"{inside}; {MASK}"
    assert redactor.text(f"{SECRET[3:15]} began it") == f"{MASK} began it"


def test_a_batch_whose_body_held_a_secret_its_parsing_cut_is_masked_in_its_items():
    source = f'{{"attributes": {{"k": "{"x" * 50}{SECRET}"}}}}'.encode()
    cut = [{"attributes": {"k": "x" * 50 + SECRET[:15] + "… [truncated 10 characters]"}}, {"attributes": {"k": "clean"}}]
    masked = Redactor([SECRET]).values(cut, source)
    assert masked == [{"attributes": {"k": "x" * 50 + MASK + "… [truncated 10 characters]"}}, {"attributes": {"k": "clean"}}]
    assert masked[1] is cut[1]  # only the item that holds it is walked
