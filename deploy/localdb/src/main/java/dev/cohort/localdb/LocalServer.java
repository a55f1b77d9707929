package dev.cohort.localdb;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

import de.bwaldvogel.mongo.MongoBackend;
import de.bwaldvogel.mongo.MongoThreadFactory;
import de.bwaldvogel.mongo.wire.MongoDatabaseHandler;
import de.bwaldvogel.mongo.wire.MongoExceptionHandler;
import de.bwaldvogel.mongo.wire.MongoWireMessageEncoder;
import de.bwaldvogel.mongo.wire.MongoWireProtocolHandler;
import de.bwaldvogel.mongo.wire.MongoWireReplyEncoder;
import de.bwaldvogel.mongo.wire.message.ClientRequest;
import de.bwaldvogel.mongo.wire.message.MongoMessage;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.group.ChannelGroup;
import io.netty.channel.group.DefaultChannelGroup;
import io.netty.channel.nio.NioEventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;

/**
 * The wire server in front of the backend: mongo-java-server's own protocol handlers, bound as
 * its {@code MongoServer} binds them, with one difference: a {@code getMore} runs on a thread
 * of a pool of its own instead of on the event loop that its connection shares with others.
 * Every other command runs on the event loop, as before. A connection its client reset is
 * logged as one line ({@link Exceptions}).
 *
 * <p>Why: a held {@code getMore} (see {@link Commands}) waits up to its {@code maxTimeMS}, as
 * MongoDB's does. On a shared event loop that wait would stall every other connection of the
 * loop, a lease renewal among them; on a thread of its own it stalls only the connection that
 * asked to wait, which sends nothing else until the reply (the C driver has one request in
 * flight per connection, so no reply overtakes another).
 */
final class LocalServer {

    private final MongoBackend backend;
    private EventLoopGroup bossGroup;
    private EventLoopGroup workerGroup;
    private ChannelGroup channels;
    private Channel listener;
    /** Where getMores run: a thread each while they are held, idle threads end after 60 s. */
    private final ExecutorService getMores = Executors.newCachedThreadPool(
            new MongoThreadFactory("localdb-getmore"));

    /** The library's database handler, with getMores handed to `getMores`. */
    private static final class Handler extends MongoDatabaseHandler {
        private final ExecutorService getMores;

        Handler(MongoBackend backend, ChannelGroup channels, ExecutorService getMores) {
            super(backend, channels);
            this.getMores = getMores;
        }

        @Override
        protected void channelRead0(ChannelHandlerContext ctx, ClientRequest request) {
            if (request instanceof MongoMessage message
                    && message.getDocument().keySet().stream().findFirst()
                            .filter("getMore"::equals).isPresent()) {
                getMores.execute(() -> super.channelRead0(ctx, request));
            } else {
                super.channelRead0(ctx, request);
            }
        }
    }

    /**
     * The library's exception handler, but a connection its client reset (a node killed, a
     * test's client gone) is one line instead of an ERROR with a stack trace per connection.
     */
    private static final class Exceptions extends MongoExceptionHandler {
        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            if (!(cause instanceof IOException)) {
                super.exceptionCaught(ctx, cause);
                return;
            }
            System.err.println("cohort-localdb: connection " + ctx.channel().id() + " closed: "
                    + cause.getMessage());
            ctx.channel().close();
        }
    }

    LocalServer(MongoBackend backend) {
        this.backend = backend;
    }

    void enableOplog() {
        backend.enableOplog();
    }

    InetSocketAddress bind(String host, int port) {
        bossGroup = new NioEventLoopGroup(1, new MongoThreadFactory("mongo-server-boss"));
        workerGroup = new NioEventLoopGroup(0, new MongoThreadFactory("mongo-server-worker"));
        channels = new DefaultChannelGroup("mongodb-channels", workerGroup.next());
        ServerBootstrap bootstrap = new ServerBootstrap()
                .group(bossGroup, workerGroup)
                .channel(NioServerSocketChannel.class)
                .option(ChannelOption.SO_BACKLOG, 100)
                .localAddress(new InetSocketAddress(host, port))
                .childOption(ChannelOption.TCP_NODELAY, Boolean.TRUE)
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        ch.pipeline().addLast(new MongoWireReplyEncoder());
                        ch.pipeline().addLast(new MongoWireMessageEncoder());
                        ch.pipeline().addLast(new MongoWireProtocolHandler());
                        ch.pipeline().addLast(new Handler(backend, channels, getMores));
                        ch.pipeline().addLast(new Exceptions());
                    }
                });
        listener = bootstrap.bind().syncUninterruptibly().channel();
        return (InetSocketAddress) listener.localAddress();
    }

    void shutdownNow() {
        if (listener != null) {
            listener.close().syncUninterruptibly();
        }
        if (channels != null) {
            channels.close().syncUninterruptibly();
        }
        if (bossGroup != null) {
            bossGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).syncUninterruptibly();
        }
        if (workerGroup != null) {
            workerGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).syncUninterruptibly();
        }
        getMores.shutdownNow();
        backend.close();
    }
}
