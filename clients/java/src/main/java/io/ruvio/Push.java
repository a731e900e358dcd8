package io.ruvio;

import java.util.List;

/**
 * A RESP3 push message ({@code >}), such as a pub/sub message, delivered out of band.
 *
 * @param items the elements of the push, first its kind (e.g. {@code "message"})
 */
public record Push(List<Object> items) {
}
