"""AdmissionReview documents in and out: what the apiserver sends for ``CREATE pods/eviction``
and the answer it expects (``admission.k8s.io/v1``; ``v1beta1`` has the same shape and is answered
in kind). Pure: bytes in, values out, values in, bytes out.

A body that is not an AdmissionReview at all (not JSON, not an object, an unknown apiVersion or
kind, no ``request.uid``) cannot be answered, since an answer must echo the uid: ``parse`` raises
``ReviewError`` and the server replies 400 with the reason, which the apiserver treats as a failed
call (the webhook's ``failurePolicy`` decides). A review that can be answered but not decided
(no pod named in it) comes back as ``EvictionReview.problem``; the service answers it per the
failure policy. A review of anything other than an eviction is allowed: graceguard has no rule for
it, and is only registered for evictions.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

VERSIONS = frozenset({"admission.k8s.io/v1", "admission.k8s.io/v1beta1"})
KIND = "AdmissionReview"


class ReviewError(ValueError):
    """The body is not an AdmissionReview that can be answered; the message says why."""


@dataclasses.dataclass(frozen=True, slots=True)
class EvictionReview:
    api_version: str
    uid: str
    namespace: str
    name: str
    username: str
    dry_run: bool
    is_eviction: bool
    """``CREATE`` of ``pods/eviction``; anything else is allowed untouched."""
    problem: str | None = None
    """Why this review cannot be decided (the pod is not named), if so."""
    grace_seconds: int | None = None
    """The eviction's ``deleteOptions.gracePeriodSeconds``; ``None``: the pod's own."""


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def parse(body: bytes) -> EvictionReview:
    """Read an AdmissionReview; raise ``ReviewError`` when it cannot be answered at all."""
    try:
        doc = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ReviewError(f"the body is not JSON: {err}") from None
    except RecursionError:
        raise ReviewError("the body is not JSON: nested too deeply") from None
    if not isinstance(doc, dict):
        raise ReviewError(f"expected an AdmissionReview object, got JSON {type(doc).__name__}")
    version = doc.get("apiVersion")
    if not isinstance(version, str) or version not in VERSIONS:
        raise ReviewError(
            f"unsupported AdmissionReview apiVersion {version!r}; graceguard answers "
            "admission.k8s.io/v1 (list it in admissionReviewVersions)"
        )
    if doc.get("kind") != KIND:
        raise ReviewError(f"expected kind AdmissionReview, got {doc.get('kind')!r}")
    request = doc.get("request")
    if not isinstance(request, dict):
        raise ReviewError("the AdmissionReview has no request object")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise ReviewError("the AdmissionReview's request has no uid")
    resource = request.get("resource")
    resource = resource if isinstance(resource, dict) else {}
    is_eviction = (
        request.get("operation") == "CREATE"
        and resource.get("group", "") == ""
        and resource.get("resource") == "pods"
        and request.get("subResource") == "eviction"
    )
    obj = request.get("object")
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    meta = meta if isinstance(meta, dict) else {}
    namespace = _text(request.get("namespace")) or _text(meta.get("namespace"))
    name = _text(request.get("name")) or _text(meta.get("name"))
    user = request.get("userInfo")
    username = _text(user.get("username")) if isinstance(user, dict) else ""
    problem = None
    if is_eviction and not (namespace and name):
        problem = "the review names no pod (request.namespace and request.name are missing)"
    return EvictionReview(
        api_version=str(version),
        uid=uid,
        namespace=namespace,
        name=name,
        username=username,
        dry_run=_dry_run(request, obj),
        is_eviction=is_eviction,
        problem=problem,
        grace_seconds=_grace(obj),
    )


def _grace(obj: object) -> int | None:
    """The grace period the evictor asks for; a value that is not a whole number of seconds
    (the apiserver validated it already) is read as none asked."""
    options = obj.get("deleteOptions") if isinstance(obj, dict) else None
    grace = options.get("gracePeriodSeconds") if isinstance(options, dict) else None
    if isinstance(grace, bool) or not isinstance(grace, int) or grace < 0:
        return None
    return grace


def _dry_run(request: Mapping[str, Any], obj: object) -> bool:
    if request.get("dryRun") is True:
        return True
    # The apiserver sets request.dryRun from the Eviction's deleteOptions too; read both.
    options = obj.get("deleteOptions") if isinstance(obj, dict) else None
    dry = options.get("dryRun") if isinstance(options, dict) else None
    return isinstance(dry, list) and "All" in dry


def answer(
    review: EvictionReview,
    *,
    allowed: bool,
    code: int = 429,
    message: str = "",
    warnings: tuple[str, ...] = (),
    audit: Mapping[str, str] | None = None,
) -> bytes:
    """The AdmissionReview answering ``review``. A refusal carries ``code`` (429 "come back
    later", as a PDB answers) and ``message``, which the apiserver passes to the evictor."""
    text = _TEXT
    out = [
        '{"apiVersion":',
        text(review.api_version),
        _KIND_THEN_UID,
        text(review.uid),
        ',"allowed":true' if allowed else ',"allowed":false',
    ]
    if not allowed:
        reason = REASONS.get(code, "BadRequest")
        out += (',"status":{"code":', str(int(code)), ',"reason":', text(reason), ',"message":')
        out += (text(message), "}")
    if warnings:
        out += (',"warnings":[', ",".join(map(text, warnings)), "]")
    if audit:
        pairs = ",".join(f"{text(k)}:{text(v)}" for k, v in audit.items())
        out += (',"auditAnnotations":{', pairs, "}")
    out.append("}}")
    return "".join(out).encode()


_TEXT = json.encoder.encode_basestring_ascii
"""A JSON string as ``json.dumps`` writes it (ASCII, escaped): the answer is written piece by
piece, a third of the time of encoding a dictionary of it."""
_KIND_THEN_UID = f',"kind":{_TEXT(KIND)},"response":{{"uid":'


REASONS = {
    400: "BadRequest",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
}
