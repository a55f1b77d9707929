package dev.cohort.localdb;

import de.bwaldvogel.mongo.bson.Document;
import de.bwaldvogel.mongo.exception.MongoServerError;
import de.bwaldvogel.mongo.exception.MongoServerException;
import io.netty.channel.Channel;

/**
 * What LocalDb adds in front of mongo-java-server's command handling, for both backends.
 *
 * <ul>
 * <li>{@code hello} is answered as {@code isMaster} (with {@code isWritablePrimary}), as
 * MongoDB 4.4.2+ does. The library refuses it, so every new connection of the C driver cost
 * a refused command, a fallback round trip and a stack trace in localdb.log (1.3 MB in five
 * minutes of tests).</li>
 * <li>A command the server refuses (a drop of a missing collection, a duplicate key...) is
 * answered with MongoDB's error document ({@code ok: 0, errmsg, code, codeName}), as before,
 * but logged as one line instead of an ERROR with a stack trace: the client got the error, and
 * it is no fault of the server. Unexpected exceptions (the library's own bugs) still reach its
 * handler and are logged in full.</li>
 * </ul>
 */
final class Commands {

    /** The backend's own handleCommand (super::handleCommand of the subclass). */
    interface Next {
        Document handle(Channel channel, String database, String command, Document query);
    }

    private Commands() {
    }

    static Document handle(Channel channel, String database, String command, Document query,
            Next next) {
        try {
            if ("hello".equalsIgnoreCase(command)) {
                Document reply = next.handle(channel, database, "isMaster", query);
                reply.put("isWritablePrimary", reply.getOrDefault("ismaster", Boolean.TRUE));
                return reply;
            }
            return next.handle(channel, database, command, query);
        } catch (MongoServerException e) {
            Document error = new Document();
            error.put("$err", e.getMessageWithoutErrorCode());
            error.put("errmsg", e.getMessageWithoutErrorCode());
            if (e instanceof MongoServerError serverError) {
                error.put("code", serverError.getCode());
                error.putIfNotNull("codeName", serverError.getCodeName());
            }
            error.put("ok", 0);
            System.err.println("cohort-localdb: " + command + " on " + database + " refused: "
                    + e.getMessageWithoutErrorCode());
            return error;
        }
    }
}
