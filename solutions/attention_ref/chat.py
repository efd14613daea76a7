"""Lesson 14, Talking to a model: a conversation rendered by its chat template, as
``transformers``' ``apply_chat_template`` renders it.

An optional module, the only one of the library that needs ``jinja2`` (nothing else in the library
imports it). A chat model was trained on conversations written in one format: Qwen3's is ChatML,
``<|im_start|>user\\n...<|im_end|>\\n<|im_start|>assistant\\n``; gpt-oss's is "harmony"; each
published model carries its format as a Jinja template, ``chat_template`` in
``tokenizer_config.json`` (or ``chat_template.jinja``). ``apply_chat_template`` renders a list of
messages (``{"role": ..., "content": ...}``) with a template in the environment ``transformers``
gives templates (a sandbox with ``trim_blocks`` and ``lstrip_blocks``, loop controls, a ``tojson``
that does not escape HTML, ``raise_exception`` and ``strftime_now``); the reference tests compare
the two. ``CHATML`` is the course's template for its tiny Qwen3, ChatML without Qwen3's tools and
thinking switch.
"""

from __future__ import annotations

import json
from datetime import datetime

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

__all__ = ["CHATML", "apply_chat_template"]

CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def _environment() -> ImmutableSandboxedEnvironment:
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)  # fmt: skip

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda format: datetime.now().strftime(format)
    return env


def apply_chat_template(template: str, messages: list, add_generation_prompt: bool = True,
                        **variables) -> str:  # fmt: skip
    """The text of a conversation: ``template`` (Jinja) rendered with ``messages`` (a list of
    ``{"role", "content"}`` dicts), ``add_generation_prompt`` (end with the assistant's turn
    opened, for the model to write it) and any ``variables`` the template reads (a model's
    special tokens, Qwen3's ``enable_thinking``)."""
    for message in messages:
        if not isinstance(message, dict) or "role" not in message:
            raise ValueError(f"a message is a dict with a 'role' and a 'content', got {message!r}")
    rendered = _environment().from_string(template).render(
        messages=messages, tools=None, documents=None,
        add_generation_prompt=add_generation_prompt, **variables,
    )  # fmt: skip
    return rendered
