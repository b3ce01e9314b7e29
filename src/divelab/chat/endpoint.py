"""Before a long run against an OpenAI-compatible endpoint: is it up, and which model id to ask for.

A command that talks to ``--llm URL`` checks here first, so that a server that is down or a model
id it does not serve is one clear error at the start, not a run of failed requests that a caller's
fallback quietly papers over.
"""

from __future__ import annotations

import httpx

from divelab.chat.openai_client import ChatClientError, env_api_key

START_HINT = "start one (e.g. `divelab serve --model smoke`) or check the URL (it usually ends in /v1)"


def list_models(base_url: str, api_key: str | None = None, timeout_s: float = 10.0,
                transport: httpx.BaseTransport | None = None) -> list[str] | None:
    """The model ids ``GET {base_url}/models`` lists; None when the server has no such route (404/405/501),
    which some OpenAI-compatible servers lack. Raises ChatClientError when the server cannot be reached
    or refuses the request."""
    url = base_url.rstrip("/") + "/models"
    key = api_key or env_api_key()
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        with httpx.Client(timeout=timeout_s, transport=transport) as http:
            r = http.get(url, headers=headers)
    except httpx.HTTPError as exc:
        raise ChatClientError(f"no OpenAI-compatible server answers at {base_url} ({type(exc).__name__}: {exc}); "
                              f"{START_HINT}") from None
    if r.status_code in (404, 405, 501):  # 501: a server that implements no GET at all
        return None
    if r.status_code in (401, 403):
        raise ChatClientError(f"{url} refused the API key (HTTP {r.status_code}); set DIVELAB_API_KEY or "
                              "OPENAI_API_KEY")
    if r.status_code >= 400:
        raise ChatClientError(f"{url} answered HTTP {r.status_code}: {r.text.strip()[:200] or '(empty)'}")
    try:
        data = r.json().get("data", [])
        return [str(m["id"]) for m in data]
    except (ValueError, AttributeError, KeyError, TypeError):
        raise ChatClientError(f"{url} did not answer with an OpenAI model list: {r.text[:200]!r}; "
                              f"is {base_url} an OpenAI-compatible base URL (usually ending in /v1)?") from None


def resolve_model(base_url: str, model: str | None, *, option: str = "--model", api_key: str | None = None,
                  transport: httpx.BaseTransport | None = None) -> str:
    """The model id to use at ``base_url``: ``model`` when the server serves it (or cannot list its
    models), else the server's only model when ``model`` is None. Raises ChatClientError naming the
    server's ids when ``model`` is not among them or is None and the choice is not obvious."""
    ids = list_models(base_url, api_key=api_key, transport=transport)
    if ids is None:
        if model is None:
            raise ChatClientError(f"{base_url} does not list its models (no /models route); name one with {option}")
        return model
    if model is None:
        if len(ids) == 1:
            return ids[0]
        if not ids:
            raise ChatClientError(f"{base_url} serves no model (its /models list is empty)")
        raise ChatClientError(f"{base_url} serves {len(ids)} models; choose one with {option}: {', '.join(ids)}")
    if model not in ids:
        raise ChatClientError(f"{base_url} does not serve model {model!r}; it serves: {', '.join(ids) or '(none)'}. "
                              f"Pass one of these with {option}, or leave {option} out when there is one")
    return model
