"""The person schema and prompt shared by the engine tests."""

PERSON_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 20},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "city": {"enum": ["Paris", "London", "Berlin"]},
    },
    "required": ["name", "age", "city"],
    "additionalProperties": False,
}
PERSON_PROMPT = "Marie is 34 and lives in Paris. Describe her as JSON."
