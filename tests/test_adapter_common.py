"""What the framework adapters share, without a framework: where a sub-agent's run is kept."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from glyphpack._history.ids import check_id
from glyphpack.adapters._common import calling_run, sub_agent, tool_call


def test_outside_a_tool_call_a_run_is_no_sub_agent():
    assert sub_agent("researcher") is None and calling_run() is None


def test_inside_a_tool_call_a_run_is_kept_in_the_callers_conversation_named_by_the_call():
    with tool_call("work", "agent", "call_7"):
        assert sub_agent("researcher") == ("work", "researcher-call_7")
        assert calling_run() == ("work", "agent")
        with tool_call("work", "researcher-call_7", "call_9"):  # the sub-agent's own tool
            assert sub_agent("reader") == ("work", "reader-call_9") and calling_run() == ("work", "researcher-call_7")
        assert calling_run() == ("work", "agent")
    assert calling_run() is None


@given(st.text(max_size=40), st.one_of(st.text(max_size=200), st.text(alphabet="ab_-.", min_size=100, max_size=200)))
def test_a_sub_agents_name_is_a_valid_agent_id_whatever_the_framework_and_the_call_name(name, call_id):
    with tool_call("work", "agent", call_id):
        nested = sub_agent(name)
    assert nested is not None and check_id(nested[1], "agent") == nested[1]


def test_a_sub_agents_name_keeps_the_agents_own_letters_and_the_call_and_only_those():
    with tool_call("work", "agent", "call:7/x"):
        assert sub_agent("Research Agent") == ("work", "Research-Agent-call-7-x")  # case kept, any other run one dash
        assert sub_agent("_Xavier") == ("work", "Xavier-call-7-x")  # a leading '_' stripped, letters never
    with tool_call("work", "agent", "--"):
        assert sub_agent("") == ("work", "subagent")  # nothing left of either: a name still
