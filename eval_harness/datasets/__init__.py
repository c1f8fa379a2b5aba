"""The datasets the harness evaluates: ingested copies of BEIR folders and live mappings onto
the RAG system's own relations (the seeds' layout, LangChain PGVector and LlamaIndex
PGVectorStore presets; integer, text or uuid ids), the harness-side keyword index and the demo
store. Every harness table about a dataset's documents, queries, labels and embeddings has its
owner module here; the server, connections and migrations are :mod:`eval_harness.store`'s."""
