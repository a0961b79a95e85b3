"""The integration API's resources as typed, immutable values (field names in Python style).

The classes come from the OpenAPI document (`_schema.py`, generated from
clients/typescript/openapi.json by `python3 clients/python/scripts/generate_models.py`). Kept by
hand here: `IntegrationContext`, which the client has always given flat (`organization_id`,
`key_scopes`, ...) where the document nests `organization` and `key`, and `rows`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Mapping, Tuple

from . import _schema
from ._schema import (
    DeskSession,
    Link,
    ProvisionedSurvey,
    ScoringFailure,
    ScoringRun,
    SessionDeletion,
    SessionEvidence,
    SessionRow,
    SessionsPage,
    SurveySummary,
)

__all__ = [
    "DeskSession",
    "IntegrationContext",
    "Link",
    "ProvisionedSurvey",
    "ScoringFailure",
    "ScoringRun",
    "SessionDeletion",
    "SessionEvidence",
    "SessionRow",
    "SessionsPage",
    "SurveySummary",
    "rows",
]


@dataclass(frozen=True)
class IntegrationContext:
    """Who a key is: `GET /integrations/v1/context`."""

    organization_id: str
    organization_name: str
    key_prefix: str
    key_label: str
    key_scopes: Tuple[str, ...]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> IntegrationContext:
        context = _schema.IntegrationContext.from_json(data)
        return cls(
            organization_id=context.organization.id,
            organization_name=context.organization.name,
            key_prefix=context.key.prefix,
            key_label=context.key.label,
            key_scopes=context.key.scopes,
        )


def rows(data: Any) -> List[SessionRow]:
    return [SessionRow.from_json(row) for row in data]
