import ruvio

r = ruvio.Ruvio("127.0.0.1", 6379)
token = r.semaphore("upstream:billing", 8, 15_000)
# 1700000000123 -> a slot, this is your token
# None          -> all 8 slots are taken
if token is not None:
    r.release("upstream:billing", token)
