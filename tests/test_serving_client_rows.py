"""Rows checked against the curated schema before `turbotfx predict` or ServingClient sends
them: every refusal names the row, the feature, the value, what is allowed and the fix;
rows the schema allows pass. Expected values come from the schema files themselves (the
real penguins schema, and schemas written here), not from the checker."""

from __future__ import annotations

import math
import re

import pytest
from google.protobuf import text_format
from tensorflow_metadata.proto.v0 import schema_pb2

from pipeline import datasets
from pipeline.datasets import prepare
from pipeline.errors import ConfigError
from pipeline.scoring.inputs import row_schema
from serving.client import ServingClient
from serving.errors import RowError, ServingClientError
from serving.rows import RowSchema
from tests.conftest import turbotfx

PENGUINS = datasets.load("penguins")
# A valid penguin (the first Gentoo of the palmerpenguins data).
GENTOO = {"island": "Biscoe", "sex": "female", "bill_length_mm": 46.1, "bill_depth_mm": 13.2,
          "flipper_length_mm": 211.0, "body_mass_g": 4500.0}

# A schema as a user might curate it: a global string domain and a global int domain
# referenced by name, inline domains, a range open at one end, a required feature (by
# min_fraction and by shape), and a column the model ignores.
CURATED = """
feature { name: "label" type: INT presence { min_fraction: 1.0 } }
feature { name: "color" type: BYTES domain: "colors" presence { min_count: 1 } }
feature { name: "size" type: BYTES string_domain { value: "S" value: "M" value: "L" } }
feature { name: "city" type: BYTES }
feature { name: "rooms" type: INT domain: "rooms" presence { min_fraction: 1.0 min_count: 1 } }
feature { name: "price" type: FLOAT float_domain { min: 0.0 } shape { dim { size: 1 } } }
feature { name: "ratio" type: FLOAT float_domain { min: -1.0 max: 1.0 } }
feature { name: "note" type: BYTES }
string_domain { name: "colors" value: "red" value: "green" }
int_domain { name: "rooms" min: 1 max: 12 }
"""
# As `turbotfx init` writes one: closed string domains, no numeric ranges, nothing required
# but the label.
INIT_STYLE = """
feature { name: "churned" type: BYTES domain: "churned" presence { min_fraction: 1.0 min_count: 1 }
          shape { dim { size: 1 } } }
feature { name: "plan/type" type: BYTES domain: "plan/type" value_count { min: 0 max: 1 } presence { min_count: 1 } }
feature { name: "Monthly Charges" type: FLOAT value_count { min: 0 max: 1 } presence { min_count: 1 } }
feature { name: "Seats" type: INT value_count { min: 0 max: 1 } presence { min_count: 1 } }
string_domain { name: "churned" value: "no" value: "yes" }
string_domain { name: "plan/type" value: "basic" value: "pro" }
"""


def _schema(text: str, label: str, features: list[str] | None = None) -> RowSchema:
    return RowSchema(text_format.Parse(text, schema_pb2.Schema()), label, features, source="test.pbtxt")


def _curated() -> RowSchema:
    return _schema(CURATED, "label", ["color", "size", "city", "rooms", "price", "ratio"])


def _refused(schema: RowSchema, rows: list) -> RowError:
    with pytest.raises(RowError) as caught:
        schema.check(schema.without_label(rows))
    assert isinstance(caught.value, ConfigError) and isinstance(caught.value, ServingClientError)
    return caught.value


def _where(problem: str) -> str:
    return re.match(r"row \d+: feature '[^']+'", problem).group()


# --- penguins: the real curated schema ---------------------------------------------------------

def test_every_row_of_the_penguins_data_passes(tmp_path) -> None:
    path = tmp_path / "penguins.csv"
    prepare.write_penguins_csv(path, PENGUINS)
    schema = row_schema(PENGUINS)
    rows = schema.rows_from_csv(path)
    assert len(rows) == 344 and {r["species"] for r in rows} == {"Adelie", "Chinstrap", "Gentoo"}
    assert any(r["sex"] is None for r in rows) and any(r["body_mass_g"] is None for r in rows)
    schema.check(schema.without_label(rows))  # the label, and missing values, are fine
    schema.check([GENTOO, {"island": "Dream"}, {**GENTOO, "sex": None, "body_mass_g": None}])


def test_a_csv_with_excels_byte_order_mark_reads_its_first_feature_by_name(tmp_path) -> None:
    path = tmp_path / "rows.csv"
    path.write_bytes("\ufeffisland,bill_length_mm,sex\nDream,40.1,female\n".encode("utf-8"))
    rows = row_schema(PENGUINS).rows_from_csv(path)
    assert rows == [{"island": "Dream", "bill_length_mm": 40.1, "sex": "female"}]


def test_a_csv_in_another_encoding_is_one_error_naming_the_fix(tmp_path) -> None:
    path = tmp_path / "rows.csv"
    path.write_bytes("island,sex\nDream,female\nBiscoe,f\u00e9male\n".encode("cp1252"))  # é as one byte
    with pytest.raises(ServingClientError) as err:
        row_schema(PENGUINS).rows_from_csv(path)
    assert str(err.value) == (f"{path} is not UTF-8 (byte 0xe9 on line 3); save it as UTF-8 (Excel: CSV UTF-8) "
                              "and try again")


@pytest.mark.parametrize("row, expected", [
    ({}, "row 0 has no feature values"),
    ({"species": "Adelie"}, "row 0 has no feature values"),  # the label alone: nothing to predict from
    ({"island": None, "sex": ""}, "row 0 has no feature values"),
    ({**GENTOO, "island": "Atlantis"},
     "row 0: feature 'island' is 'Atlantis', not in the schema's domain 'island' (Biscoe, Dream, Torgersen)"),
    ({**GENTOO, "sex": "Female"}, "did you mean 'female'?"),
    ({**GENTOO, "bill_length_mm": 1e308}, "row 0: feature 'bill_length_mm' is 1e+308, beyond a 32-bit float"),
    ({**GENTOO, "bill_length_mm": 700.0},
     "row 0: feature 'bill_length_mm' is 700.0, outside the schema's range (from 25 to 70"),
    ({**GENTOO, "body_mass_g": 1999.5}, "feature 'body_mass_g' is 1999.5, outside the schema's range (from 2000 to 7000"),
    ({**GENTOO, "body_mass_g": math.nan}, "row 0: feature 'body_mass_g' is nan, not a finite number"),
    ({**GENTOO, "body_mass_g": -math.inf}, "row 0: feature 'body_mass_g' is -inf, not a finite number"),
    ({**GENTOO, "bill_depth_mm": "14.8"}, "row 0: feature 'bill_depth_mm' must be a number, got str '14.8'"),
    ({**GENTOO, "bill_depth_mm": True}, "feature 'bill_depth_mm' must be a number, got bool True"),
    ({**GENTOO, "island": 3}, "row 0: feature 'island' must be text, got int 3"),
    ({**GENTOO, "bill_lenght_mm": 40.0}, "row 0: unknown feature 'bill_lenght_mm' (value 40.0); did you mean "
                                         "'bill_length_mm'?"),
])
def test_penguin_rows_the_schema_forbids(row, expected) -> None:
    error = _refused(row_schema(PENGUINS), [GENTOO, row])  # the valid row 0 passes
    assert len(error.problems) == 1 and error.problems[0].startswith("row 1"), error.problems
    assert expected.replace("row 0", "row 1") in str(error), str(error)


def test_a_message_names_what_is_allowed_and_the_fix() -> None:
    error = _refused(row_schema(PENGUINS), [{**GENTOO, "island": "Atlantis"}])
    [line] = str(error).splitlines()
    assert str(PENGUINS.schema) in line and "use one of those values" in line
    error = _refused(row_schema(PENGUINS), [{**GENTOO, "flipper_length_mm": 1500.0}])
    assert "from 150 to 250" in str(error) and "check the value and its unit" in str(error)


def test_every_problem_of_every_row_is_listed_up_to_a_limit() -> None:
    schema = row_schema(PENGUINS)
    error = _refused(schema, [GENTOO, {**GENTOO, "island": "Atlantis", "body_mass_g": 1e308}, {}])
    assert error.problems == [
        error.problems[0], error.problems[1], "row 2 has no feature values (the model uses island, sex, "
        "bill_length_mm, bill_depth_mm, flipper_length_mm, body_mass_g); give at least one"]
    assert [_where(p) for p in error.problems[:2]] == ["row 1: feature 'island'", "row 1: feature 'body_mass_g'"]
    many = _refused(schema, [{"island": "Atlantis"}] * 25)
    assert len(many.problems) == 25
    assert str(many).splitlines()[-1] == "... and 5 more problems" and len(str(many).splitlines()) == 21


@pytest.mark.parametrize("rows, expected", [
    ([], "no rows to predict"),
    (["Biscoe"], "row 0 is str 'Biscoe', not an object of feature: value"),
])
def test_no_rows_or_rows_that_are_not_objects(rows, expected) -> None:
    with pytest.raises(ServingClientError, match=expected):
        row_schema(PENGUINS).check(rows)


# --- a schema written here: global and inline domains, open ranges, required features --------

def test_curated_rows_that_pass() -> None:
    schema = _curated()
    assert schema.required == {"rooms", "price"}
    schema.check([
        {"label": 1, "color": "red", "size": "L", "city": "anything", "rooms": 12, "price": 0.0, "ratio": -1.0},
        {"rooms": 1.0, "price": 1e30, "note": "ignored by the model, known to the schema"},
        {"rooms": 3, "price": 5, "color": None, "ratio": None},
    ])


@pytest.mark.parametrize("row, expected", [
    ({"rooms": 3, "price": 1.0, "color": "blue"}, "feature 'color' is 'blue', not in the schema's domain 'colors' "
                                                  "(green, red)"),
    ({"rooms": 3, "price": 1.0, "size": "XL"}, "feature 'size' is 'XL', not in the schema's domain 'size' (L, M, S)"),
    ({"rooms": 0, "price": 1.0}, "feature 'rooms' is 0, outside the schema's range (from 1 to 12, test.pbtxt)"),
    ({"rooms": 13, "price": 1.0}, "feature 'rooms' is 13, outside the schema's range (from 1 to 12"),
    ({"rooms": 2.5, "price": 1.0}, "feature 'rooms' must be a whole number, got 2.5"),
    ({"rooms": 2 ** 63, "price": 1.0}, "feature 'rooms' is 9223372036854775808, beyond a 64-bit integer"),
    ({"rooms": 3, "price": -0.01}, "feature 'price' is -0.01, outside the schema's range (at least 0"),
    ({"rooms": 3, "price": 1.0, "ratio": 1.5}, "feature 'ratio' is 1.5, outside the schema's range (from -1 to 1"),
    ({"price": 1.0, "city": "Oslo"}, "feature 'rooms' is missing; the schema (test.pbtxt) requires it in every row"),
    ({"rooms": 3, "city": "Oslo"}, "feature 'price' is missing"),  # required by its fixed shape
    ({"rooms": 3, "price": None}, "feature 'price' is missing"),
    ({"note": "the model ignores this column"}, "row 0 has no feature values (the model uses color, size, city, "
                                                "rooms, price, ratio)"),
])
def test_curated_rows_the_schema_forbids(row, expected) -> None:
    error = _refused(_curated(), [row])
    assert len(error.problems) == 1, error.problems
    assert expected in str(error), str(error)


def test_init_style_schema_has_no_ranges_but_refuses_what_the_model_cannot_take() -> None:
    schema = _schema(INIT_STYLE, "churned")
    assert schema.required == set()
    schema.check([{"Monthly Charges": -5e30, "Seats": 10 ** 12, "plan/type": "pro", "churned": "no"},
                  {"Seats": 1}])
    for row, expected in [
        ({"Monthly Charges": 1e39}, "beyond a 32-bit float"),
        ({"Monthly Charges": math.inf}, "not a finite number"),
        ({"plan/type": "enterprise"}, "not in the schema's domain 'plan/type' (basic, pro)"),
        ({"Seats": "two"}, "must be a number, got str 'two'"),
    ]:
        assert expected in str(_refused(schema, [row]))


def test_csv_cells_are_typed_then_checked(tmp_path) -> None:
    table = tmp_path / "rows.csv"
    table.write_text("species,island,sex,bill_length_mm,bill_depth_mm,flipper_length_mm,body_mass_g\n"
                     "Gentoo,Biscoe,female,46.1,13.2,211,4500\n"
                     "Adelie,Torgersen,NA,,18.5,,3700\n"
                     "Adelie,Atlantis,male,long,18.5,inf,3700\n")
    schema = row_schema(PENGUINS)
    rows = schema.without_label(schema.rows_from_csv(table))
    schema.check(rows[:2])
    error = _refused(schema, rows)
    assert [_where(p) for p in error.problems] == [
        "row 2: feature 'island'", "row 2: feature 'bill_length_mm'", "row 2: feature 'flipper_length_mm'"]


# --- the client and the command refuse before sending ------------------------------------------

def test_the_client_drops_the_label_and_refuses_before_connecting() -> None:
    # Nothing listens on the port: a request would fail as unavailable, not as a bad row.
    client = ServingClient(schema=row_schema(PENGUINS), rest_url="http://127.0.0.1:9", retries=0, timeout_s=1)
    with pytest.raises(RowError, match="row 0: feature 'island' is 'Atlantis'"):
        client.predict([{"species": "Adelie", **GENTOO, "island": "Atlantis"}])
    with pytest.raises(ServingClientError, match="unavailable"):
        client.predict([{"species": "Adelie", **GENTOO}])


@pytest.mark.parametrize("row, expected", [
    ("{}", "row 0 has no feature values"),
    ('{"island": "Atlantis"}', "row 0: feature 'island' is 'Atlantis', not in the schema's domain"),
    ('{"bill_length_mm": 1e308}', "row 0: feature 'bill_length_mm' is 1e+308, beyond a 32-bit float"),
    ('{"bill_length_mm": NaN}', "row 0: feature 'bill_length_mm' is nan, not a finite number"),
])
def test_the_predict_command_refuses_bad_rows(tmp_path, row, expected) -> None:
    result = turbotfx("predict", "--json", row, "--rest", "http://127.0.0.1:9", home=tmp_path)
    assert result.exit_code == 2, result.output
    assert f"turbotfx: error: {expected}" in result.output
    assert "Traceback" not in result.output


def test_synthetic_required_features_come_from_its_schema() -> None:
    schema = row_schema(datasets.load("synthetic"))
    # Every feature of synthetic.schema.pbtxt has min_fraction 1, except days_since_last_visit.
    assert schema.required == {"channel", "country", "category", "brand", "product_id", "price", "discount_pct",
                               "session_seconds", "pages_viewed", "cart_items"}
    row = {"channel": "web", "country": "NO", "category": "books", "brand": "b7", "product_id": "p123",
           "price": 12.5, "discount_pct": 10.0, "session_seconds": 300, "pages_viewed": 4, "cart_items": 1}
    schema.check([row, {**row, "days_since_last_visit": 3.0, "purchased": 1}])
    error = _refused(schema, [{k: v for k, v in row.items() if k != "price"}])
    assert error.problems == [f"row 0: feature 'price' is missing; the schema ({schema.source}) requires it "
                              "in every row: give a value"]
    assert "row 0: feature 'session_seconds' is 100000, outside the schema's range (from 0 to 86400" in str(
        _refused(schema, [{**row, "session_seconds": 100000}]))


def test_a_client_needs_exactly_one_server() -> None:
    with pytest.raises(ServingClientError, match="give exactly one server"):
        ServingClient(schema=row_schema(PENGUINS))
    with pytest.raises(ServingClientError, match="give exactly one server"):
        ServingClient(schema=row_schema(PENGUINS), grpc_target="127.0.0.1:1", rest_url="http://127.0.0.1:2")
