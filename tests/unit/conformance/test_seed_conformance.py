"""Conformance with the source documents in `../shared/seeds/`: each test names the seed file and the section its
example or test case comes from, and runs that example through the real code. (The seeds are not read at test
time: a fresh clone has no `../shared`; their examples are quoted here.)"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from debate import DebateConfig, Verifier, VerifierConfig
from debate.calls import load_prompt
from debate.config import PrefilterConfig
from debate.llm import ChatRequest, ChatResponse
from debate.plugins import TaskInput
from debate.prefilter import (
    APIEndpointChecker,
    PermissionChecker,
    ToolCall,
    ToolCallChecker,
    ToolRegistry,
    citation_check,
    self_correct,
)
from debate.prefilter._grounding import CLAIM_WARNING, response_warning
from debate.results import evaluation_rates, parse_record, refchecker_item
from debate.testing import ScriptedChatClient, yes_no_response
from tests.support.helpers import op


def _refchecker_item(record: dict[str, Any], *args: Any) -> dict[str, Any]:
    """refchecker_item on a results-log record written as JSON (the log's own shape)."""
    return refchecker_item(parse_record(record), *args)


# --- 001-paper-markov-debate.md, appendix A.1, Tables 6-9 -------------------------------------------------------

# (the paper's instruction, quoted from the seed's Chinese text, -> the words that carry it in our paper set)
SHARED_6_TO_8: list[tuple[str, str]] = [
    ("你是三个代理人中的…代理人", "You are one of three agents: Trust, Skeptic and Leader."),
    (
        "请不要重复前一个代理人的意见…作为参考，而不是直接复制",
        "Do not repeat or copy an earlier opinion. Use it only as a reference and develop a view of your own.",
    ),
    ("回应应该是一个包含三个键的字典", "Reply with only a dictionary with exactly these three keys"),
    (
        '"factuality"…如果给定的文本符合事实，则为True，否则为False',
        '"factuality": True if the given text is factual, else False.',
    ),
    ('"Error severity"…整数 - 范围从0到5', '"Error severity": an integer from 0 to 5'),
    ("请仔细比较“声明”和“证据”，并提供适当的等级", "Carefully compare the claim and the evidence, and give the level"),
    (
        "你应该仅按照以下格式回复。不要返回其他内容。请从‘{{’开始",
        'and nothing before or after it; your reply must start with "{"',
    ),
    ("你的观点应该由相应的证据支持", "backed by the evidence"),
    ("0. 无错误", "0 - no error: the claim is fully consistent with the facts."),
    (
        "1. 轻微错误…拼写错误、日期错误或小的数字差异",
        "1 - minor error: small mistakes that do not change the essence of the claim, such as a typo, a wrong date or "
        "a small numeric difference.",
    ),
    (
        "2. 中等错误…错误的术语、不恰当的统计数据或与证据的轻微偏差",
        "a wrong term, a misused statistic or a slight departure from the evidence.",
    ),
    (
        "3. 重大错误…严重夸大或低估、错误使用专家权威或操控背景",
        "a large exaggeration or understatement, misused expert authority or a distorted context.",
    ),
    (
        "4. 严重错误…证据与声明存在根本性矛盾",
        "4 - severe error: the claim is negated or invalidated because the evidence fundamentally contradicts it",
    ),
    ("5. 虚假声明…完全虚构或故意误导", "5 - false: the claim is entirely made up or deliberately misleading"),
]
ROLE_INSTRUCTIONS: dict[str, list[tuple[str, str]]] = {
    "trust": [  # Table 6
        (
            "尽可能信任前一个代理人的意见，并在此基础上进一步展开",
            "trust the previous agent's opinion as much as possible and build on it",
        ),
        ("你将获得前一个代理人生成的意见", "You are given the previous agent's opinion."),
        (
            "仔细检查相应的证据是否支持前一个代理人提出的陈述",
            "Check whether the evidence supports each of its statements",
        ),
        ("如果你认为其中任何部分是准确的，请基于此进一步分析", "extend the parts you judge to be accurate"),
        (
            "然后根据提供的信息[evidences]和前一个代理人的意见评估初始声明[text]的事实性",
            "judge the factuality of the claim from the evidence and the previous agent's opinion",
        ),
        (
            "首先分析前一个代理人的意见，指出你认为它的意见中正确或错误的地方并解释原因",
            "first analyse the previous agent's opinion, saying what you think is right or wrong in it and why",
        ),
        ("记住你应该尽可能信任前一个代理人的意见", "remember to trust it as much as possible"),
    ],
    "skeptic": [  # Table 7
        ("质疑前一个代理的观点", "doubt the previous agent's opinion as much as possible"),
        ("你会得到前一个代理生成的观点", "You are given the previous agent's opinion."),
        ("识别前一个代理观点中可能存在的错误或误导因素", "errors, misleading parts, bias or inconsistencies"),
        (
            "仔细检查相应的证据是否支持前一个代理提出的陈述",
            "Check whether the evidence supports each of the previous agent's statements",
        ),
        (
            "如果你认为它的观点有任何部分不正确，请指出并解释你的看法",
            "point out what is wrong in the previous agent's opinion and why",
        ),
        (
            "批判性地审查声明[text]的有效性，考虑信息[evidences]和声明[text]之间的潜在偏见或不一致性",
            "critically examine the claim's validity, looking for bias or inconsistencies between the evidence and the "
            "claim",
        ),
        ("记住，你应该尽可能怀疑前一个代理的观点", "remember to doubt it as much as possible"),
    ],
    "leader": [  # Table 8
        (
            "’信任’代理会尽可能快速地相信前一个代理的意见",
            "the Trust agent believes the previous agent's opinion as readily as possible",
        ),
        ("’怀疑’代理会尽可能快速地怀疑前一个代理的意见", "the Skeptic agent doubts it as readily as possible"),
        ("你将会收到前两个代理生成的意见", "you are given the opinions of the two previous agents"),
        ("得出一个关于声明([文本])真实性的最准确和可靠的结论", "the most accurate and reliable conclusion of your own"),
        ("在形成你自己的观点时，你需要考虑这两个代理的特点", "taking these dispositions into account"),
        ("评估双方的优缺点", "Judge the strengths and weaknesses of each side against the evidence"),
        ("首先解释你对前两个代理意见的看法", "first explain what you think of the two previous agents' opinions"),
        (
            "参考’信任’代理和’怀疑’代理的意见，得出你认为正确的新观点",
            "from the Trust and Skeptic opinions, reach a new view that you judge correct",
        ),
    ],
}
TABLE_9: list[tuple[str, str]] = [
    (
        "给定一段文本，请删除你认为完全是个人意见且不包含任何事实信息的句子",
        "Given a text, delete the sentences that you judge to be entirely personal opinion, with no factual "
        "information.",
    ),
    ("你输出的内容应该是修改后的原文句子", "Output the remaining sentences of the original text, unchanged."),
    ("如果你认为整句是个人意见，请输出None", "If you judge the whole text to be personal opinion, output None."),
    (
        "[文本]: 我的荣幸，如果你需要更多推荐，告诉我。[回应]: None",
        "Text: My pleasure, and let me know if you need any more recommendations. Response: None",
    ),
    (
        "[文本]: 《星星的故障》是一本幻想小说。你读过吗？[回应]: 《星星的故障》是一本幻想小说。",
        "Text: The Fault in Our Stars is a fantasy novel. Have you read it? Response: The Fault in Our Stars is a "
        "fantasy novel.",
    ),
    ("现在完成以下[文本]: {输入} [回应]:", "Text: $response Response:"),
]


# The sentences that carry the tables' framing and Table 12's inputs rather than one instruction each.
FRAMING: list[tuple[str, str]] = [
    ("你是三个代理人中的*信任*代理人 / *Skeptic*代理 / *领导*代理", "You are the $role agent."),
    (
        "请参考声明[text]和证据[evidences]，分析前一个代理人的意见[previous opinions]",
        "You are given the claim, the evidence, and the earlier opinion(s) of other agents.",
    ),
    (
        "首先分析前一个代理人的意见，指出你认为它的意见中正确或错误的地方并解释原因",
        "First analyse the earlier opinion(s): say which parts are right and which are wrong, and why.",
    ),
    ("然后根据证据[evidences]，描述你对声明[text]的事实性的看法", "Then judge the claim against the evidence."),
    ("不同错误严重性等级的定义如下", "The error severity levels are defined as follows:"),
    (
        '[响应格式]: {{ "opinion": ..., "factuality": ..., "Error severity": ... }}',
        '{"opinion": "<your analysis, then your judgment>", "factuality": True or False, "Error severity": <an integer '
        "from 0 to 5>}",
    ),
    ("表 12: 提示 + 声明与证据 (the [text] and [evidences] of the prompt)", "Evidence: $evidence Claim: $claim"),
    ('表 12: 怀疑提示 + "以下是前一个代理的回应：" + 初始答案', "Here is the previous agent's response: $previous"),
    ("表 12: 领导代理: 两个代理的回应", "$opinions"),
]
# Headings and list numbers that carry no instruction of their own.
LAYOUT = {"How to work:", "1.", "2.", "3."}


def test_001_no_sentence_of_the_paper_set_goes_beyond_tables_6_to_9_and_12() -> None:
    """The reverse of the test above: every sentence of the Trust, Skeptic and Leader prompts carries one of the
    tables' instructions, their framing or Table 12's inputs; a sentence added beyond them fails here."""
    from debate.sentences import split_sentences

    for role in ("trust", "skeptic", "leader"):
        carried = [
            ours.replace("$role", role.capitalize()) for _, ours in [*SHARED_6_TO_8, *ROLE_INSTRUCTIONS[role], *FRAMING]
        ]
        prompt = load_prompt(role, "paper")
        lines = (prompt.system + "\n" + prompt.user).splitlines()
        # A numbered instruction is one sentence with its number ("3. Do not ..."): the number is layout.
        sentences = [re.sub(r"^\d+\.\s+", "", s) for line in lines for s in split_sentences(line)]
        beyond = [s for s in sentences if s not in LAYOUT and not any(s in c or c in s for c in carried)]
        whole = " ".join(sentences)
        beyond += [c for c in ("Evidence: $evidence Claim: $claim",) if c not in whole]
        assert (role, beyond) == (role, [])


def _rendered(name: str, prompt_set: str = "paper") -> str:
    prompt = load_prompt(name, prompt_set)
    return " ".join((prompt.system + "\n" + prompt.user).split())


@pytest.mark.parametrize("prompt_set", ["paper", "refchecker"])
@pytest.mark.parametrize("role", ["trust", "skeptic", "leader"])
def test_001_tables_6_to_8_every_instruction_is_in_the_paper_set(role: str, prompt_set: str) -> None:
    """001, appendix A.1, Tables 6 (Trust), 7 (Skeptic), 8 (Leader); the refchecker set is the paper's plus one
    instruction, so it carries them all too."""
    text = _rendered(role, prompt_set)
    instructions = [*SHARED_6_TO_8, *ROLE_INSTRUCTIONS[role]]
    if prompt_set == "refchecker":
        # Its one departure: a fourth key, "enough evidence", so the dictionary is not of exactly three keys.
        instructions = [(q, ours) for q, ours in instructions if q != "回应应该是一个包含三个键的字典"]
        assert '"enough evidence": False' in text
    missing = [quote for quote, ours in instructions if ours not in text]
    assert missing == []
    # Nothing the paper does not say: no rule tying the two judgments, no length cap, no softening of the Skeptic.
    for invented in ("two separate judgments", "at most three sentences", "for its own sake", "severity 0 or 1"):
        assert invented not in text.lower()


def test_001_table_9_the_filter_is_the_papers() -> None:
    """001, appendix A.1, Table 9: the text alone (no dialogue history) and the paper's two examples."""
    text = _rendered("subjective_filter")
    assert [quote for quote, ours in TABLE_9 if ours not in text] == []
    assert load_prompt("subjective_filter", "paper").variables == ("response",)


# 001, appendix A.2, Table 12: the Landseer example (our English rendering of the seed's text).
CLAIM = (
    "Question: Does the Landseer or the English Mastiff have a limited range of colours? Answer: The Landseer has a "
    "limited range of colours, while the English Mastiff has a wider range."
)
EVIDENCE = (
    "This is distinct from the white and black Newfoundland, also often called the Landseer. The English Mastiff is "
    "a very large dog breed, distinguished by its enormous size, massive head and limited range of colours, but "
    "always displaying a black mask."
)


async def test_001_table_12_inputs_of_each_agent() -> None:
    """001, appendix A.2, Table 12: S0 says True, so the chain moves to S2 = Skeptic -> Trust -> Leader; the Skeptic
    gets its prompt + "Here is the previous agent's response:" + the initial answer, the Trust agent the Skeptic's
    output the same way, the Leader "Here is the Skeptic agent's response:" + the Skeptic's output + "Here is the
    Trust agent's response:" + the Trust agent's output."""
    initial = op(True, 0, "The claim agrees with the evidence, which mentions the mastiff's limited colours.")
    skeptic = op(False, 4, "The evidence says the English Mastiff's colours are limited, contradicting the answer.")
    trust = op(False, 4, "I agree with the previous agent: the Mastiff claim is contradicted by the evidence.")
    leader = op(False, 4, "Both agents agree the Mastiff claim is contradicted; the answer is not factual.")
    client = ScriptedChatClient(
        {"debate:initial": [initial], "debate:skeptic": [skeptic], "debate:trust": [trust], "debate:leader": [leader]}
    )
    config = VerifierConfig(debate=DebateConfig(min_rounds=1, max_rounds=3))
    async with Verifier(config=config, client=client) as verifier:
        report = await verifier.verify(TaskInput("x", claims=[CLAIM], reference=EVIDENCE), task="general")
    assert client.purposes() == ["debate:initial", "debate:skeptic", "debate:trust", "debate:leader"]
    s0, sk, tr, le = (c.request.messages[-1].content for c in client.calls)
    assert CLAIM in s0 and EVIDENCE.split(".")[0] in s0 and "agent's response" not in s0

    def seen(reply: str) -> str:
        body = json.loads(reply)
        return json.dumps(
            {"opinion": body["opinion"], "factuality": body["factuality"], "Error severity": body["Error severity"]}
        )

    assert f"Here is the previous agent's response:\n{seen(initial)}" in sk
    assert f"Here is the previous agent's response:\n{seen(skeptic)}" in tr
    assert le.index(f"Here is the Skeptic agent's response:\n{seen(skeptic)}") < le.index(
        f"Here is the Trust agent's response:\n{seen(trust)}"
    )
    debate = report.claims[0].debate
    assert debate is not None and [s.name for s in debate.states] == ["S0", "S2"]
    assert report.verdict == "non_factual" and report.claims[0].error_severity == 4


# --- 002-logprob-grounding.md -------------------------------------------------------------------------------------


SOURCES = {
    "S0": "The appraiser set the compensation at 50,000 shekels.",
    "S1": "The hearing took place in Tel Aviv in March 2023.",
}
# claim id -> (P(YES) with every source, P(YES) with the cited ones redacted)
PROBABILITIES = {"c0": (0.92, 0.25), "c1": (0.05, 0.05), "c2": (0.30, 0.30)}
ANSWER = (
    "The appraiser set the compensation at 50,000 shekels [S0]. The hearing took place in Haifa in 2021 [S1]. "
    "Awards of this size are very common in similar cases."
)


async def test_002_testing_the_four_cases_through_the_prefilter() -> None:
    """002 "Testing": 1 a fully supported claim is not flagged; 2 a claim contradicting its context is flagged;
    3 a confabulated claim (not in the context) is flagged; 4 a response with mixed support gets the right flags.
    "Cost Considerations": two calls per claim. "Response Format": the warning on every ungrounded claim and at the
    top level."""

    def grounding(request: ChatRequest) -> ChatResponse:
        # Routed by the call's site ("c0:grounding:p1"), never by the prompt's wording.
        assert request.site is not None
        claim_id, _, which = request.site.split(":")
        full, redacted = PROBABILITIES[claim_id]
        return yes_no_response(full if which == "p1" else redacted)

    client = ScriptedChatClient({"grounding": [grounding] * 6, "debate": [op(True)] * 3})
    config = VerifierConfig(
        debate=DebateConfig(min_rounds=0, max_rounds=0), prefilter=PrefilterConfig(prefilters=["logprob"])
    )
    async with Verifier(config=config, client=client) as verifier:
        report = await verifier.verify(TaskInput(ANSWER, reference=SOURCES), task="rag")
    assert report.prefilter is not None and report.prefilter.hallucination_check is not None
    block = report.prefilter.hallucination_check
    assert [c.grounded for c in block.claims] == [True, False, False]  # cases 1, 2, 3; together case 4
    assert [c.warning for c in block.claims] == [None, CLAIM_WARNING, CLAIM_WARNING]
    assert [c.citing for c in block.claims] == [["S0"], ["S1"], []]
    assert (block.grounded_claims, block.total_claims, block.overall_grounded) == (1, 3, False)
    assert block.warning == response_warning(2)
    assert client.purposes().count("grounding") == 6  # two per claim, the uncited one included
    for claim in report.claims:
        grounding_result = claim.prefilters[0].grounding
        assert grounding_result is not None and grounding_result.band is None  # the seed has no bands


# --- 000-rag-citation-rules-and-judge.md --------------------------------------------------------------------------

LONG = "This sentence is comfortably longer than fifty characters, and it goes on and on well past a hundred of them"


def test_000_rule_output_fields_and_the_first_three_uncited_sentences() -> None:
    """000 "規則基礎檢測的輸出": the six fields; uncited_sentences are the first 3, each `sentence.strip()[:100]`."""
    answer = f"Paris is the capital of France [1]. {LONG} one. {LONG} two. {LONG} three. {LONG} four."
    report = citation_check(answer, ["1"])
    assert set(report.model_dump()) >= {
        "has_hallucination_risk",
        "hallucination_risk_score",
        "valid_citations",
        "invalid_citations",
        "uncited_sentences",
        "citation_ratio",
    }
    assert report.uncited_sentences == [LONG[:100]] * 3 and report.uncited_count == 4
    assert report.risk_level == "high"  # "uncited_sentences 數量 >= 3"


@pytest.mark.parametrize(
    ("answer", "note"),
    [
        ("   ", "Answer is empty, cannot detect hallucinations"),
        ("Yes [1]. Sure. No.", "No valid claims found, cannot detect hallucinations"),
    ],
)
def test_000_special_cases_are_no_risk(answer: str, note: str) -> None:
    """000 "空答案處理" and "無有效斷言處理": no risk, score 0.0, the seed's note."""
    report = citation_check(answer, ["1"])
    assert (report.has_hallucination_risk, report.hallucination_risk_score, report.note) == (False, 0.0, note)


@pytest.mark.parametrize(
    ("answer", "score", "level"),
    [
        ("Paris is the capital of France [1]. The Seine flows through Paris [2].", 0.0, "low"),
        ("Paris is the capital of France [1]. The Seine flows through Paris today.", 0.5, "moderate"),
        ("Paris is the capital of France [1]. The Seine flows through it. Lyon lies on the Rhone.", 2 / 3, "high"),
    ],
)
def test_000_risk_table(answer: str, score: float, level: str) -> None:
    """000 "風險分級": 0.0-0.3 low, 0.3-0.6 moderate, 0.6-1.0 high; score = 1 - min(ratio, 1)."""
    report = citation_check(answer, ["1", "2"])
    assert report.hallucination_risk_score == pytest.approx(score) and report.risk_level == level
    assert report.has_hallucination_risk is (score > 0.3)


async def test_000_the_claim_and_the_answer_read_an_id_list_alike() -> None:
    """000 步驟 1 `re.findall(r'\\[([^\\]]+)\\]', answer)`: `[S0, S1]` is one id, not in the results, so invalid,
    in the answer's report and in its claim's check alike; an invalid citation raises the answer's risk and decides
    no claim ("無效引用 → 高風險指標")."""
    client = ScriptedChatClient({"debate": [op(True)]})
    config = VerifierConfig(
        debate=DebateConfig(min_rounds=0, max_rounds=0), prefilter=PrefilterConfig(prefilters=["rules"])
    )
    async with Verifier(config=config, client=client) as verifier:
        report = await verifier.verify(
            TaskInput("Both sources say the compensation was 50,000 shekels [S0, S1].", reference=SOURCES), task="rag"
        )
    assert report.prefilter is not None and report.prefilter.citation is not None
    assert report.prefilter.citation.invalid_citations == ["S0, S1"] and report.prefilter.risk_level == "high"
    [claim] = report.claims
    assert "S0, S1" in claim.prefilters[0].reason and claim.decided_by == "debate"


# --- 003-tool-call-checks.md --------------------------------------------------------------------------------------

REGISTRY = ToolRegistry.from_openai(
    [
        {
            "name": "post_message",
            "parameters": {"type": "object", "properties": {"to": {"type": "string"}, "message": {"type": "string"}}},
        },
        {
            "name": "read_file",
            "parameters": {
                "type": "object",
                "properties": {"file_path": {"type": "string", "enum": ["/srv/app/README.md", "/srv/app/config.toml"]}},
            },
        },
        {
            "name": "api_call",
            "parameters": {
                "type": "object",
                "additionalProperties": True,
                "properties": {"endpoint": {"type": "string"}},
            },
        },
        {"name": "delete_database", "parameters": {"type": "object", "properties": {"database": {"type": "string"}}}},
        {
            "name": "search",
            "parameters": {"type": "object", "properties": {"limit": {"type": "integer", "minimum": 1, "maximum": 50}}},
        },
        {"name": "summarize", "parameters": {"type": "object", "properties": {}}},
    ]
)
ENGINE = ToolCallChecker(
    REGISTRY,
    fact_checkers=[APIEndpointChecker({"main": "example.com/api/v1"}), PermissionChecker(granted={"read:database"})],
)


def test_003_the_four_hallucination_types_of_7_4_1() -> None:
    """003 §7.4.1 table: tool (`send_email_to_ceo()`), parameter (`file_path="/root/.ssh/id_rsa"`), fact (an
    endpoint `example.com/api/v2` where the real one is v1) and capability (deleting a database without the
    permission)."""
    [tool] = ENGINE.check("send_email_to_ceo", {"message": "Hello"})
    assert tool.kind == "tool_name"
    [parameter] = ENGINE.check("read_file", {"file_path": "/root/.ssh/id_rsa"})
    assert (parameter.kind, parameter.confidence) == ("parameter", 0.95)  # 枚举值检查
    [fact] = ENGINE.check("api_call", {"endpoint": "example.com/api/v2"})
    assert (fact.kind, fact.confidence) == ("fact", 0.85)
    assert ENGINE.check("api_call", {"endpoint": "example.com/api/v1"}) == []
    assert len(ENGINE.check("api_call", {"endpoint": "example.com/api/v1/../v2"})) == 1  # membership, not prefix
    [capability] = ENGINE.check("delete_database", {"database": "prod"})
    assert (capability.kind, capability.confidence) == ("fact", 0.9)
    granted = ToolCallChecker(REGISTRY, fact_checkers=[PermissionChecker(granted={"delete:database"})])
    assert granted.check("delete_database", {"database": "prod"}) == []


def test_003_layer_1_tool_names() -> None:
    """003 层 1: similarity > 0.6 is a typo (0.9, "you may want to call"); otherwise 0.95 with the first five
    available tools."""
    [typo] = ENGINE.check("serch", {})
    assert (typo.confidence, typo.correction) == (0.9, "you may have meant to call 'search'")
    [invented] = ENGINE.check("send_email_to_ceo", {"message": "Hello"})
    assert invented.confidence == 0.95
    assert invented.correction == "available tools: post_message, read_file, api_call, delete_database, search"


def test_003_layer_2_parameters() -> None:
    """003 层 2: a parameter not in the definition (0.8, with the allowed ones) even where the schema allows extra
    properties; a value below the minimum or above the maximum (0.9); a value outside the enum (0.95)."""
    [undefined] = ENGINE.check("api_call", {"endpoint": "example.com/api/v1", "verb": "DELETE"})
    assert (undefined.confidence, undefined.correction) == (0.8, "allowed parameters: ['endpoint']")
    assert [(f.confidence, f.evidence) for f in ENGINE.check("search", {"limit": 0})] == [
        (0.9, "parameter 'limit' value 0 is less than the minimum 1")
    ]
    assert [f.confidence for f in ENGINE.check("search", {"limit": 51})] == [0.9]


async def test_003_flow_example_and_self_correction() -> None:
    """003 "流程示例": `send_email_to_ceo` with {"message": "Hello"} is a hallucination; the correction goes back
    to the model and its reply is the suggestion (SelfCorrectionHandler, one attempt)."""
    call = ToolCall(name="send_email_to_ceo", arguments={"message": "Hello"})
    reply = json.dumps({"name": "post_message", "arguments": {"to": "ceo@example.com", "message": "Hello"}})
    client = ScriptedChatClient({"tool_correction": [reply]})
    result = await self_correct(ENGINE, call, client)
    assert result.suggestion == reply and result.attempts == 1 and result.error is None
    assert result.corrected == ToolCall(name="post_message", arguments={"to": "ceo@example.com", "message": "Hello"})
    sent = client.calls[0].request.messages[-1].content
    assert "- tool 'send_email_to_ceo' does not exist at all" in sent


# --- 004-refchecker-readme.md -------------------------------------------------------------------------------------


def _result(labels: list[str | None]) -> dict[str, Any]:
    claims: list[dict[str, Any]] = [
        {
            "claim_id": f"c{i}",
            "text": f"t{i}",
            "status": "verified" if label else "unverifiable",
            "label": label,
            "factual": None if label in (None, "not_enough_evidence") else label == "factual",
            "error_severity": 0 if label else None,
            "evidence": [],
            "debate": None,
        }
        for i, label in enumerate(labels)
    ]
    meta: dict[str, Any] = {
        "model": "m",
        "base_url": None,
        "embedded": False,
        "config": {},
        "prompts": {},
        "seed": 0,
        "package_version": "0",
        "git_commit": None,
        "created_at": "2026-01-01T00:00:00Z",
    }
    return {
        "task": "general",
        "question": None,
        "response": "r",
        "factual": None,
        "verdict": "unverifiable",
        "rollup": "any-false",
        "ratios": {"factual": 0, "non_factual": 0, "unverifiable": 0},
        "extraction": {"method": "given"},
        "claims": claims,
        "usage": {},
        "elapsed_s": 0,
        "meta": meta,
    }


def test_004_input_and_output_and_the_default_soft_aggregator() -> None:
    """004 "check": the input item's fields are kept, `Y` and `ys` are added; `--aggregator_name` defaults to soft
    ("the ratio of each category"), strict and major give a label string."""
    record = {
        "response": "r",
        "claims": [["h1", "r1", "t1"], ["h2", "r2", "t2"], ["h3", "r3", "t3"]],
        "reference": "ref",
        "line": 1,
        "result": _result(["factual", "not_enough_evidence", "non_factual"]),
    }
    item = _refchecker_item(record)
    assert item["ys"] == ["Entailment", "Neutral", "Contradiction"] and item["claims"] == record["claims"]
    assert item["Y"] == pytest.approx({"Entailment": 1 / 3, "Neutral": 1 / 3, "Contradiction": 1 / 3, "Abstain": 0})
    assert _refchecker_item(record, "strict")["Y"] == "Contradiction"
    assert (
        _refchecker_item({**record, "result": _result(["factual", "factual", "not_enough_evidence"])}, "major")["Y"]
        == "Entailment"
    )
    assert _refchecker_item({**record, "result": _result(["factual", "not_enough_evidence"])}, "strict")["Y"] == (
        "Neutral"
    )


def test_004_abstain_when_there_are_no_triplets() -> None:
    """004 "Evaluation Metric": no triplets for a response is Abstain; under soft Y is a dict of ratios."""
    record = {"response": "I'm sorry, I can't answer that.", "line": 1, "result": _result([])}
    assert _refchecker_item(record)["Y"] == {"Entailment": 0.0, "Neutral": 0.0, "Contradiction": 0.0, "Abstain": 1.0}
    assert _refchecker_item(record, "strict")["Y"] == "Abstain"


def test_004_evaluation_metric_example() -> None:
    """004 "Evaluation Metric": 3 Entailment, 5 Neutral and 2 Contradiction claims of 10 give rates 0.3, 0.5 and
    0.2 for that response; the rates are averaged over the responses."""
    one = {"ys": ["Entailment"] * 3 + ["Neutral"] * 5 + ["Contradiction"] * 2}
    rates = evaluation_rates([one])
    assert rates.rates == pytest.approx({"Entailment": 0.3, "Neutral": 0.5, "Contradiction": 0.2, "Abstain": 0.0})
    averaged = evaluation_rates([one, {"ys": []}, {"ys": ["Entailment", None]}, {"error": {}, "ys": []}])
    # RefChecker's evaluate.py: the abstaining response is left out of the label averages and makes the abstain
    # rate; a label other than the three (a failed claim's None) counts as Neutral; an error item is ours to skip.
    assert (averaged.responses, averaged.abstained, averaged.unlabelled_claims, averaged.excluded) == (3, 1, 1, 1)
    assert averaged.rates == pytest.approx({"Entailment": 0.4, "Neutral": 0.5, "Contradiction": 0.1, "Abstain": 1 / 3})
