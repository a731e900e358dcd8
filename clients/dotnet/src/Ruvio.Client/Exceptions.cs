namespace Ruvio;

/// <summary>
/// Base class of every exception this client throws. <see cref="FateUnknown"/> tells whether the command may or may
/// not have run on the server (it was written, then the connection was lost or the timeout passed).
/// </summary>
public class RuvioException : Exception
{
    /// <summary>Creates the exception.</summary>
    public RuvioException(string message, bool fateUnknown = false, Exception? inner = null) : base(message, inner) => FateUnknown = fateUnknown;

    /// <summary>
    /// True when the command had been written to the server and no reply came (connection lost or timed out): it
    /// may or may not have run. The client never sends a <c>LEASE</c> or <c>SEMAPHORE</c> again in that case: a
    /// grant may exist on the server; it will expire at its TTL.
    /// </summary>
    public bool FateUnknown { get; }

    /// <summary>The command (name and arguments) this exception is about, when known.</summary>
    public string? Command { get; internal set; }
}

/// <summary>An error reply from the server (<c>-ERR ...</c>, <c>-WRONGTYPE ...</c>, <c>-NOTDURABLE ...</c>): the command's fate is known.</summary>
public class RuvioServerException : RuvioException
{
    /// <summary>Creates the exception from the whole error text (code first).</summary>
    public RuvioServerException(string text) : base(text) => Code = CodeOf(text);

    /// <summary>The first word of the error: <c>ERR</c>, <c>WRONGTYPE</c>, <c>NOREPLICAS</c>, <c>NOTDURABLE</c>, <c>READONLY</c>, <c>NOAUTH</c>, ...</summary>
    public string Code { get; }

    internal static string CodeOf(string text)
    {
        var space = text.IndexOf(' ');
        return space < 0 ? text : text[..space];
    }
}

/// <summary>The server could not be reached, the connection was lost, or the client was disposed.</summary>
public class RuvioConnectionException : RuvioException
{
    /// <summary>Creates the exception.</summary>
    public RuvioConnectionException(string message, bool fateUnknown = false, Exception? inner = null) : base(message, fateUnknown, inner) { }
}

/// <summary>
/// No reply within the command timeout (<see cref="RuvioOptions.AsyncTimeout"/>). When <see cref="RuvioException.FateUnknown"/>
/// is true the command had been written and may have run.
/// </summary>
public class RuvioTimeoutException : RuvioException
{
    /// <summary>Creates the exception.</summary>
    public RuvioTimeoutException(string message, bool fateUnknown) : base(message, fateUnknown) { }
}

/// <summary>The server sent bytes that are not valid RESP; the connection is closed.</summary>
public class RuvioProtocolException : RuvioException
{
    /// <summary>Creates the exception.</summary>
    public RuvioProtocolException(string message) : base(message) { }
}
