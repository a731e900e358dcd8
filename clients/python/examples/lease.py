import ruvio

r = ruvio.Ruvio("127.0.0.1", 6379)
token = r.lease("job:nightly-report", 30_000)
# token -> you hold it
# None -> someone else holds it
if token is not None:
    released = r.release("job:nightly-report", token)
    # True -> released (False if the token no longer matches)
