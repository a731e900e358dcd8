"""Any command, a pipeline, an optimistic transaction and pub/sub.

    RUVIO_PORT=6379 python examples/commands.py
"""

import os

import ruvio

r = ruvio.Ruvio("127.0.0.1", int(os.environ.get("RUVIO_PORT", "6379")), decode_responses=True)
r.set("greeting", "hello", ex=60)
print(r.get("greeting"), r.execute_command("STRLEN", "greeting"))

hits, greeting = r.pipeline(transaction=False).incr("hits").get("greeting").execute()
print("hits", hits, greeting)


def add_ten(pipe: ruvio.Pipeline) -> None:
    balance = int(pipe.immediate.get("balance") or 0)
    pipe.set("balance", balance + 10)


r.transaction(add_ten, "balance")  # WATCH balance, MULTI, SET, EXEC; retried if balance changed meanwhile
print("balance", r.get("balance"))

ps = r.pubsub(ignore_subscribe_messages=True)
ps.subscribe("news")
ps.get_message(timeout=0.1)
r.publish("news", "ruvio is up")
print(ps.get_message(timeout=5))
ps.close()
r.close()
