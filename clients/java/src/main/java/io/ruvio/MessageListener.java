package io.ruvio;

/**
 * Receives pub/sub messages of a {@link Subscription}. Called on the subscription's reader thread, one message at a
 * time: return quickly.
 */
@FunctionalInterface
public interface MessageListener {
    /**
     * A message published on a subscribed channel.
     *
     * @param channel the channel
     * @param message the message
     */
    void onMessage(String channel, String message);

    /**
     * A message published on a channel matching a subscribed pattern. By default calls
     * {@link #onMessage(String, String)}.
     *
     * @param pattern the pattern that matched
     * @param channel the channel
     * @param message the message
     */
    default void onPatternMessage(String pattern, String channel, String message) {
        onMessage(channel, message);
    }
}
