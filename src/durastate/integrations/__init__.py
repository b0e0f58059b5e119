"""Backends for the frameworks people already use, on any durastate URL.

Each module is one framework's storage contract implemented on durastate's
public facets, in its own extra, imported only when you import the module (a
missing framework raises ``ImportError`` naming the extra to install):
``langgraph`` (``[langgraph]``), ``openai_agents`` (``[openai-agents]``),
``langchain`` (``[langchain]``), ``eventsourcing`` (``[eventsourcing]``,
``PERSISTENCE_MODULE=durastate.integrations.eventsourcing``) and ``huey``
(``[huey]``: ``DurastateHuey``, whose dequeued tasks are leased, not
deleted), ``adk`` (``[adk]``) and ``pydantic_ai`` (``[pydantic-ai]``:
``DurastateConversationStore``). Each is tested against the framework's own suite for third-party
backends (or a differential test), on SQLite and PostgreSQL. Their async
methods run the sync implementation through ``durastate.aio``'s runner
(``_common``): inline on the event loop's thread on a SQLite file, on worker
threads on PostgreSQL or while another connection holds the write lock.
"""
