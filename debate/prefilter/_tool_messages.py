"""What the tool-call checks say, in the tool-call source's own words (zh: its Chinese, character for character) or
in our English rendering of them (en, the default). Values are formatted as the source's f-strings format them
(`str(value)`, a list as Python writes it), so a message names a value the way the source's would."""

from __future__ import annotations

from typing import Literal

__all__ = ["MessageLanguage", "message"]

MessageLanguage = Literal["en", "zh"]
"""en: our English rendering (default); zh: the source's Chinese text exactly for its own checks, and our Chinese
for the schema checks beyond them."""

_TEXT: dict[str, dict[MessageLanguage, str]] = {
    "tool_close": {"en": "tool '{name}' does not exist", "zh": "工具 '{name}' 不存在"},
    "tool_close_fix": {"en": "you may have meant to call '{best}'", "zh": "您可能想调用 '{best}'"},
    "tool_none": {"en": "tool '{name}' does not exist at all", "zh": "工具 '{name}' 完全不存在"},
    "tool_none_fix": {"en": "available tools: {tools}", "zh": "可用工具: {tools}"},
    "undefined": {"en": "parameter '{name}' is not in the tool definition", "zh": "参数 '{name}' 未在工具定义中"},
    "undefined_fix": {"en": "allowed parameters: {allowed}", "zh": "允许的参数: {allowed}"},
    "below": {
        "en": "parameter '{name}' value {value} is less than the minimum {limit}",
        "zh": "参数 '{name}' 值 {value} 小于最小值 {limit}",
    },
    "below_fix": {"en": "please use a value not less than {limit}", "zh": "请使用不小于 {limit} 的值"},
    "above": {
        "en": "parameter '{name}' value {value} is greater than the maximum {limit}",
        "zh": "参数 '{name}' 值 {value} 大于最大值 {limit}",
    },
    "above_fix": {"en": "please use a value not greater than {limit}", "zh": "请使用不大于 {limit} 的值"},
    "enum": {
        "en": "parameter '{name}' value '{value}' is not in the allowed list",
        "zh": "参数 '{name}' 值 '{value}' 不在允许列表中",
    },
    "enum_fix": {"en": "allowed values: {allowed}", "zh": "允许的值: {allowed}"},
    "endpoint": {
        "en": "API endpoint '{endpoint}' does not exist in the knowledge base",
        "zh": "API 端点 '{endpoint}' 在知识库中不存在",
    },
    "endpoint_fix": {"en": "please use a known API endpoint", "zh": "请使用已知的 API 端点"},
    "permission": {"en": "insufficient user permissions", "zh": "用户权限不足"},
    "permission_fix": {"en": "the delete operation cannot be executed", "zh": "无法执行删除操作"},
    "intro": {
        "en": "I found the following problems in your last message, please try again:",
        "zh": "我发现您上一条消息中存在以下问题,请重新尝试:",
    },
    "suggestion": {"en": "Suggestion", "zh": "建议"},
    "outro": {"en": "Please call the correct tool again.", "zh": "请重新调用正确的工具。"},
    "passed": {"en": "The tool call passed all checks.", "zh": "工具调用通过验证,可以执行"},
    # Beyond the source (its checks stop at the top level): ours, in both languages.
    "missing": {"en": "missing required parameter {name}", "zh": "缺少必需参数 {name}"},
    "missing_fix": {"en": "provide {name}", "zh": "请提供 {name}"},
    "extra": {"en": "parameter {name} is not in the tool definition", "zh": "参数 {name} 不在其所属对象的定义中"},
    "type": {"en": "{where} is {kind}, the schema wants {wanted}", "zh": "{where} 的类型是 {kind},定义要求 {wanted}"},
    "type_fix": {"en": "send {where} as {wanted}", "zh": "请以 {wanted} 类型发送 {where}"},
    "enum_nested": {"en": "{where}={value} is not one of {options}", "zh": "{where}={value} 不在 {options} 之中"},
    "enum_nested_fix": {"en": "use one of {options} for {where}", "zh": "{where} 请使用 {options} 之一"},
    "below_nested": {"en": "{where}={value} is below the minimum {limit}", "zh": "{where}={value} 小于最小值 {limit}"},
    "below_nested_fix": {"en": "use a value >= {limit} for {where}", "zh": "{where} 请使用不小于 {limit} 的值"},
    "above_nested": {"en": "{where}={value} is above the maximum {limit}", "zh": "{where}={value} 大于最大值 {limit}"},
    "above_nested_fix": {"en": "use a value <= {limit} for {where}", "zh": "{where} 请使用不大于 {limit} 的值"},
    "schema": {"en": "{where}: {detail}", "zh": "{where}: 不符合定义 ({detail})"},
    "schema_fix": {"en": "make {where} satisfy its schema ({rule})", "zh": "请让 {where} 符合其定义 ({rule})"},
    "not_json": {"en": "the arguments are not valid JSON{detail}", "zh": "参数不是有效的 JSON{detail}"},
    "not_object": {"en": "the arguments are JSON {kind}, not an object", "zh": "参数是 JSON {kind},不是对象"},
    "one_object": {"en": "send the arguments as one JSON object", "zh": "请以一个 JSON 对象发送参数"},
    "the_arguments": {"en": "the arguments", "zh": "参数"},
}


def message(key: str, language: MessageLanguage = "en", **values: object) -> str:
    """The text `key` in `language`, its {names} filled with the values as `str()` writes them."""
    return _TEXT[key][language].format(**{k: str(v) for k, v in values.items()})
