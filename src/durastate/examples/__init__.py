"""Runnable examples: ``python -m durastate.examples.NAME [URL]``.

Each prints what happens and exits 0 only if its checks held (default: a
fresh SQLite file in a temporary folder; pass a ``postgresql://`` URL to run
it on a server): ``langgraph``, ``openai_agents``, ``langchain``,
``eventsourcing`` (an event-sourced application and a process application
following it) ``huey`` (a consumer killed with SIGKILL mid-task, its
task finished by the next consumer), ``adk`` and ``pydantic_ai`` (an agent
killed mid-turn, its conversation resumed in another process).
"""
