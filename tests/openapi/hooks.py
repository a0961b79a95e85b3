"""Schemathesis hooks for the OpenAPI fuzz test (tests/it/openapi_fuzz.rs), loaded through
SCHEMATHESIS_HOOKS.

CPython 3.11 before 3.11.8 can raise SystemError("AST constructor recursion depth mismatch")
from ast.parse when it is called deep in a stack; Hypothesis parses the source of a module to
describe a filter's lambda, and schemathesis's generators call it from deep inside nested
generators. The description is cosmetic (a label), so this falls back to Hypothesis's own
"<unknown>" form instead of aborting the run with a runtime error.
"""

import hypothesis.internal.lambda_sources as lambda_sources

_describe = lambda_sources._lambda_description


def _describe_or_unknown(f, *args, **kwargs):
    try:
        return _describe(f, *args, **kwargs)
    except SystemError:
        return "lambda: <unknown>"


lambda_sources._lambda_description = _describe_or_unknown
